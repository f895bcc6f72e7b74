# verify --config checks what run and serve would refuse (issue 32): a CUDA device (this run
# computes on the CPU), a model directory that is missing, [moe] against the model's
# config.json, an unfolded journal under deterministic addressing; every problem is listed, a
# missing table among them; the shipped example configs (pointed at the test's model) pass.
source $SRC/tests/cli/lib.sh
demo_model m
v() {  # v NAME CONFIG: exit status and the problems' fields
  set +e; $E verify --config "$2" --json > out.json 2> err.txt; local rc=$?; set -e
  echo "$1: exit $rc: $($PY -c "import json,sys; d=json.load(open('out.json')); print(' | '.join(p['field'] for p in d['problems']) or 'ok')" 2>/dev/null || head -n 1 err.txt)"
}
buckets=$(sed -n 's/^hash_buckets = \([0-9]*\).*/\1/p' m.det.toml)  # the fixture's (demo_model), not the demo's
for ex in config serve; do
  sed -e "s|\.\./\.\./build/demo/model|$PWD/m|" -e "s|\.\./\.\./build/demo/engram_weights/ngram_table_v3.bin|$PWD/m.engram|" \
    -e "s|^hash_buckets = [0-9]*|hash_buckets = $buckets|" "$SRC/examples/demo/$ex.toml" > ex_$ex.toml
  v "examples/demo/$ex.toml" ex_$ex.toml
done
# The fixture's configs name its model and table as m and m.engram; m.det.toml (deterministic
# addressing, as examples/demo/config.toml) passes as it is.
model_re='^path = "m"$' table_re='^path = "m.engram"$'
v "m.det.toml" m.det.toml
sed 's|device = "cpu"|device = "cuda:0"|' m.det.toml > cuda.toml
v "cuda device" cuda.toml
grep -q 'device .*cuda:0.*cuda.toml:7: model.device' out.json && echo "the problem names the device and its config line"
sed "s|$model_re|path = \"$PWD/no-such-model\"|" m.det.toml > nomodel.toml
v "model dir missing" nomodel.toml
grep -o 'no-such-model has no config.json' out.json | head -n 1
sed 's|num_experts = 8|num_experts = 64|' m.det.toml > experts.toml
v "expert count" experts.toml
grep -o 'num_experts = 64 but [^ ]*/config.json has n_routed_experts = 8' out.json | sed 's|but .*/config|but m/config|' | head -n 1
cp m.engram j.engram
printf '{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' > f.jsonl
sed "s|$table_re|path = \"$PWD/j.engram\"|" m.toml > j.toml
$E -q append --config j.toml --entries f.jsonl -t 1 > /dev/null
sed "s|$table_re|path = \"$PWD/j.engram\"|" m.det.toml > jdet.toml
v "unfolded journal, deterministic" jdet.toml
sed -e 's|device = "cpu"|device = "cuda:0"|' -e 's|num_experts = 8|num_experts = 64|' \
  -e "s|$table_re|path = \"$PWD/missing.engram\"|" m.det.toml > all.toml
v "all at once, table missing" all.toml

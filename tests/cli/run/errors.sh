# Clear errors, never a crash: CUDA device without CUDA, missing model files, table/model mismatch,
# table over host_memory_limit_gb, unfolded journal with deterministic addressing.
source $SRC/tests/cli/lib.sh
random_model m v41
try() { local code=0; "$@" > /dev/null 2> err.txt || code=$?; echo "exit $code: $(head -c 600 err.txt | tr '\n' ' ')"; }
try $E run --config m.toml "x" --device cuda:0
mkdir empty; try $E run --model empty --table m.engram "x"
cp -r m m2; rm m2/model.safetensors; try $E run --config m.toml --model m2 "x"
tiny_table other.engram; try $E run --config m.toml --table other.engram "x"
sed 's/^\[engram\]$/[engram]\nhost_memory_limit_gb = 0.000001/' m.toml > small.toml; try $E run --config small.toml "x"
$PY -c "import json; print(json.dumps({'canonical_ids': [5, 6], 'value': [0.5]*16}))" > e.jsonl
$E -q append m.engram --entries e.jsonl > /dev/null; try $E run --config m.toml "x"
printf '[moe]\nnum_experts = 64\n' >> m.toml; try $E run --config m.toml "x" --no-engram

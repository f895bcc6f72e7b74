# A table built with --tile-values (2^12 buckets per sub-table from the model's 2^10) is accepted by
# run, and the model continues a prompt exactly as with its own table, greedy and sampled.
source $SRC/tests/cli/lib.sh
random_model m v41
$E -q build --tokenizer "$ASSETS/deepseek_v3/tokenizer.json" --corpus corpus.txt --layers 0,2 --order 3 --heads 2 \
  --buckets 4096 --row-dim 16 --pad-id 2 --values m --tensor engram.table.weight --tile-values -o big.engram
sed "s|hash_buckets = 1024|hash_buckets = 4096|; s|m.engram|big.engram|" m.toml > big.toml
ids() {  # ids CONFIG FLAGS...: the generated ids
  $E -q run --config "$@" "The jury said that the city" -n 12 --json |
    $PY -c "import json,sys; print(json.load(sys.stdin)['prompts'][0]['output_ids'])"
}
for mode in "--temp 0" "--temp 0.8 --seed 4"; do
  a=$(ids m.toml $mode); b=$(ids big.toml $mode)
  echo "$mode: same continuation: $([[ "$a" == "$b" ]] && echo yes || echo no)"
done

#!/usr/bin/env bash
# C++ forward pass vs the PyTorch reference (issue 6): max |logit diff| <= 1e-4 in f32 and identical
# greedy continuations of 32 tokens on >= 20 prompts.
#   parity.sh ENGRAMCTL SRC ASSETS MODEL_DIR|trained|random:VARIANT
set -euo pipefail
E=$1 SRC=$2 A=$3 which=$4
T=$A/deepseek_v3/tokenizer.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fp=$($E tokenize --tokenizer "$T" --info --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['fingerprint'])")
case $which in
  trained)
    m=$work/model
    mkdir -p "$m"
    cp "$SRC/assets/demo-model/config.json" "$m/"
    zstd -q -d "$SRC/assets/demo-model/model.safetensors.zst" -o "$m/model.safetensors"
    dtype=bf16 ;;
  random:*)
    m=$work/model
    /usr/bin/python3 "$SRC/tests/model_parity/make_random_model.py" "$m" "${which#random:}" "$fp"
    dtype=f32 ;;
  *) m=$which; dtype=bf16 ;;
esac
cp "$T" "$m/tokenizer.json"
read -r layers order heads log2 d < <(/usr/bin/python3 -c "
import json; e=json.load(open('$m/config.json'))['engram']
print(','.join(map(str,e['layer_ids'])), e['max_ngram_size'], e['n_head_per_ngram'], e['log2_buckets'], e['n_embed_per_ngram']//e['n_head_per_ngram'])")
head -n 40 "$A/brown/train.txt" > "$work/corpus.txt"
$E -q build --tokenizer "$T" --corpus "$work/corpus.txt" --layers "$layers" --order "$order" --heads "$heads" \
  --buckets $((1 << log2)) --row-dim "$d" --dtype "$dtype" --pad-id 2 --values "$m" --tensor engram.table.weight \
  -o "$work/t.engram"
cat > "$work/c.toml" <<TOML
[model]
path = "$m"
dtype = "float32"
[engram]
ngram_order = $order
hash_buckets = $((1 << log2))
n_heads = $heads
embed_dim = $((heads * d))
layer_ids = [$layers]
[engram.table]
path = "$work/t.engram"
[inference]
kv_cache_dtype = "f32"
TOML
/usr/bin/python3 - "$work/prompts.txt" <<'PY'
import sys
prompts = ["The jury said", "It was the first time that", "In the morning the", "The President of the United States",
    "She looked at him and", "There is no reason to believe", "The city council voted", "He said that the",
    "We", "A", "Of course, the", "The results of the experiment were", "After the war, many", "The church",
    "In 1961 the", "Mrs. Jones told the reporters that", "The price of", "Science and religion",
    "Quantum gravity negotiates", "你好，世界", "He walked into the room, sat down, and", "The first thing to do is",
    "It is not clear whether", "The old man"]
open(sys.argv[1], "w").write("\n".join(prompts) + "\n")
PY
$E -q run --config "$work/c.toml" -f "$work/prompts.txt" --temp 0 -n 32 --batch 1 -t 2 --json \
  --dump-logits "$work/c.f32" > "$work/c.json" 2> "$work/c.log" || { cat "$work/c.log"; exit 1; }
/usr/bin/python3 "$SRC/scripts/model/reference_run.py" --model "$m" --engramctl "$E" --prompts "$work/prompts.txt" \
  -n 32 --threads 2 --dump-logits "$work/r.f32" --json "$work/r.json"
/usr/bin/python3 "$SRC/tests/model_parity/compare.py" "$work/c.json" "$work/c.f32" "$work/r.json" "$work/r.f32" 129280 1e-4

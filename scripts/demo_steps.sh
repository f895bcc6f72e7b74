#!/usr/bin/env bash
# The demo's steps after the build (scripts/demo.sh runs them from the repository root; the README
# test runs them in a scratch copy of it): in the current directory, with build/bin/engramctl,
# build/assets and assets/demo-model, it assembles build/demo/model, builds and checks its table,
# teaches the model a fact and runs a prompt.
set -euo pipefail
E=build/bin/engramctl
A=build/assets
C=examples/demo/config.toml
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# The model directory: config.json and weights from assets/demo-model, the tokenizer it was trained with.
m=build/demo/model
mkdir -p "$m" build/demo/engram_weights
cp assets/demo-model/config.json "$m/"
[[ -f "$m/model.safetensors" && "$m/model.safetensors" -nt assets/demo-model/model.safetensors.zst ]] ||
  zstd -q -d -f assets/demo-model/model.safetensors.zst -o "$m/model.safetensors"
cp "$A/deepseek_v3/tokenizer.json" "$m/"
t=build/demo/engram_weights/ngram_table_v3.bin  # [engram.table] path of $C

step $E build --config $C --corpus $A/brown/train.txt --values "$m" --tensor engram.table.weight --tile-values
step $E verify --config $C
step $E inspect $t --stats
step $E lookup --config $C "The jury said it did find that many of Atlanta's"

# Teach the model a fact it cannot know: ask, fit the table rows the prompt reads through the
# frozen model (append --fit), fold them into the base, ask again.
printf '{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' > build/demo/fact.jsonl
step $E run --config $C "The capital of Zorvania is" -n 4 --temp 0
step $E append --config $C --entries build/demo/fact.jsonl
step $E sort-buckets $t
step $E run --config $C "The capital of Zorvania is" -n 4 --temp 0
step $E lookup --config $C "The capital of Zorvania is"

step $E run --config $C "The jury said that the city" -n 40 --temp 0.7 --seed 3
echo
echo "demo.sh: done. Model: $m, table: $t, config: $C."

#!/usr/bin/env bash
# Generation throughput (issue 6): engramctl run against the PyTorch reference running the same
# model, same prompt, same greedy decoding, same thread count, side by side (best of 3 each).
# Target: >= 1.5x. Also the Engram lookup overhead: engramctl with the table vs --no-engram.
# Run ./scripts/demo.sh first (it assembles build/demo/model and the table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
E=build/bin/engramctl
cfg=examples/demo/config.toml
n=${N_PREDICT:-64}
prompt="The jury said that the city"
echo "$prompt" > build/bench/run_prompt.txt
best_cpp() {  # best eval tokens/s of 3 runs: best_cpp THREADS [extra flags]
  local t=$1; shift
  for _ in 1 2 3; do
    $E -q run --config "$cfg" -f build/bench/run_prompt.txt -n "$n" --temp 0 -t "$t" --json "$@" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d['eval_tokens']/d['eval_seconds'])"
  done | sort -g | tail -1
}
best_ref() {
  for _ in 1 2 3; do
    /usr/bin/python3 scripts/model/reference_run.py --model build/demo/model --engramctl "$E" \
      --prompts build/bench/run_prompt.txt -n "$n" --threads "$1" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d['eval_tokens']/d['eval_seconds'])"
  done | sort -g | tail -1
}
for t in 1 2; do
  c=$(best_cpp "$t"); r=$(best_ref "$t"); ne=$(best_cpp "$t" --no-engram)
  awk -v t="$t" -v c="$c" -v r="$r" -v ne="$ne" -v n="$n" 'BEGIN {
    printf "threads %d, %d greedy tokens: PyTorch reference %.1f tok/s, engramctl %.1f tok/s, ratio %.2f (target >= 1.5)\n", t, n, r, c, c / r
    printf "threads %d: engramctl --no-engram %.1f tok/s; Engram lookup overhead %.1f%%\n", t, ne, 100 * (ne - c) / ne
  }'
done

#!/usr/bin/env bash
# `engramctl serve` under load (issue 13): tokens/s and p50/p99 latency at 1, 4 and 8 concurrent
# clients (loopback, REQUESTS each, greedy, MAX_TOKENS tokens), next to `run` generating the same
# prompts in batches of the same size; the 8-client round runs with appends committing meanwhile
# (deterministic_addressing = false) and must end with 0 errors and 0 inconsistent responses.
# Self-contained: uses the small random test model (tests/model_parity/make_random_model.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export E=$root/build/bin/engramctl SRC=$root ASSETS=${ASSETS:-$root/build/assets} PY=/usr/bin/python3
REQUESTS=${REQUESTS:-50} MAX_TOKENS=${MAX_TOKENS:-16} THREADS=${THREADS:-2}
work=$(mktemp -d)
source "$root/tests/cli/lib.sh"
source "$root/tests/cli/serve_lib.sh"
trap 'stop_serve; rm -rf "$work"' EXIT
cd "$work"
random_model m v41 2>/dev/null
sed -i 's/^ngram_order = 3$/ngram_order = 3\ndeterministic_addressing = false/' m.toml
printf '[inference]\nmax_batch_size = 8\n' >> m.toml
head -n 40 "$ASSETS/brown/train.txt" | cut -c1-80 | sed 's/[\\"]//g' > prompts.txt
T=$ASSETS/deepseek_v3/tokenizer.json
cat > append_one.sh <<SH
n=\$(date +%s%N)
$PY -c "import json,sys; print(json.dumps({'text': ' fact' + sys.argv[1][-6:], 'value': [0.25] * 16}))" "\$n" > e.\$n.jsonl
$E -q append --config m.toml --entries e.\$n.jsonl --tokenizer $T >/dev/null 2>&1
SH
start_serve serve.log --config m.toml -t "$THREADS"
wait_ready
for c in 1 4 8; do
  during=()
  [[ $c == 8 ]] && during=(--during "bash append_one.sh")
  s=$($PY "$root/bench/serve_load.py" --url "$URL" --clients $c --requests "$REQUESTS" \
        --max-tokens "$MAX_TOKENS" --prompts prompts.txt "${during[@]}")
  # run: the same number of prompts, batched by c, one process (load time excluded).
  head -n $((c * REQUESTS)) < <(for _ in $(seq $((c * REQUESTS / 40 + 1))); do cat prompts.txt; done) > run_prompts.txt
  r=$($E -q run --config m.toml -f run_prompts.txt -n "$MAX_TOKENS" --temp 0 -t "$THREADS" --batch $c --json 2>/dev/null |
      $PY -c "import json,sys; d=json.load(sys.stdin); print(d['eval_tokens'] / (d['prompt_seconds'] + d['eval_seconds']))")
  $PY - "$s" "$r" <<'PY'
import json, sys
s = json.loads(sys.argv[1]); r = float(sys.argv[2])
print('%d clients x %d requests: serve %.1f tok/s (run, batch %d: %.1f tok/s, serve/run %.2f), '
      'latency p50 %.3f s p99 %.3f s, errors %d, inconsistent %d%s' % (
      s['clients'], s['requests'] // s['clients'], s['tokens_per_s'], s['clients'], r,
      s['tokens_per_s'] / r, s['p50_s'], s['p99_s'], s['errors'], s['inconsistent'],
      ', appends committed meanwhile %d, table generations seen %d' % (s['during_runs'], s['generations_seen'])
      if s['during_runs'] else ''))
if s['errors'] or s['inconsistent']:
    print('FAIL:', s['first_error'] or s['first_inconsistency']); sys.exit(1)
PY
done
curl -s --max-time 10 "$URL/metrics" | grep -E '^engram_(batches|batched_requests)_total ' | tr '\n' ' '
echo "(requests per batch = batched_requests / batches)"

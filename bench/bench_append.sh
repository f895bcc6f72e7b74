#!/usr/bin/env bash
# append cost must not grow with the table (issue 5): 1,000 entries appended to a 4 GiB table and
# to a 64 MiB table of the same layout, side by side (median of 5; each run starts from an empty
# journal). Target: 4 GiB time <= 1.5x the 64 MiB time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=${1:-$root/build/bench}
mkdir -p "$work"
common=(--vocab-size 50000 --layers 1 --order 3 --heads 8 --row-dim 256 --dtype f32)
[[ -f $work/append_small.engram ]] || $E -q build "${common[@]}" --buckets 4K -o "$work/append_small.engram"
[[ -f $work/append_big.engram ]] || $E -q build "${common[@]}" --buckets 256K -o "$work/append_big.engram"
/usr/bin/python3 - "$work/entries1000.jsonl" <<'PY'
import json, random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        n = r.choice([2, 3])
        f.write(json.dumps({"canonical_ids": [r.randrange(50000) for _ in range(n)],
                            "value": [round(r.uniform(-1, 1), 4) for _ in range(256)]}) + "\n")
PY
median_append() {  # median wall time of 5 appends of the entries to $1, journal reset between runs
  local t=$1 base times=()
  base=$($E inspect "$t" --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['base_bytes'])")
  cat "$t" > /dev/null
  for _ in 1 2 3 4 5; do
    truncate -s "$base" "$t"
    local s e
    s=$(date +%s.%N); $E -q append "$t" --entries "$work/entries1000.jsonl" > /dev/null; e=$(date +%s.%N)
    times+=("$(echo "$e - $s" | bc -l)")
  done
  truncate -s "$base" "$t"
  printf '%s\n' "${times[@]}" | sort -n | sed -n 3p
}
small=$(median_append "$work/append_small.engram")
big=$(median_append "$work/append_big.engram")
awk -v s="$small" -v b="$big" -v ss="$(stat -c %s "$work/append_small.engram")" -v bs="$(stat -c %s "$work/append_big.engram")" 'BEGIN {
  printf "append 1000 entries (8000 journal records) to a %.0f MiB table: %.3fs\n", ss / 2^20, s
  printf "append 1000 entries (8000 journal records) to a %.2f GiB table: %.3fs  ratio %.2f (target <= 1.5)\n", bs / 2^30, b, b / s
}'

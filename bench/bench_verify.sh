#!/usr/bin/env bash
# verify against `xxhsum -H3` over the same warm file, on four table shapes (issue 15 item 7):
# rows-heavy (f32, 256 values a row), tags/stats-heavy (2 values a row: TAGS and STATS dominate),
# fp8 with e8m0 scales, and a table with a large journal (20,000 appended entries, ~100 MiB).
# Runs are interleaved; each side's best of N. Target: ratio (xxhsum time / verify time) >= 1.0.
#   bench/bench_verify.sh [WORKDIR] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=${1:-$root/build/bench}
runs=${2:-7}
mkdir -p "$work"
mk() {  # mk NAME build-flags...
  local t=$work/verify_$1.engram; shift
  [[ -f $t ]] || $E -q build --vocab-size 50000 --layers 1 --order 3 --heads 8 "$@" -o "$t"
}
mk rows --buckets 64K --row-dim 256
mk stats --buckets 1M --row-dim 2
mk fp8 --buckets 32K --row-dim 512 --dtype fp8-e4m3
if [[ ! -f $work/verify_journal.engram ]]; then
  mk journal_base --buckets 32K --row-dim 512 --dtype fp8-e4m3
  /usr/bin/python3 -c "
import json, random
r = random.Random(1)
with open('$work/verify_journal.jsonl', 'w') as f:
    for i in range(20000):
        f.write(json.dumps({'canonical_ids': [r.randrange(50000), r.randrange(50000)], 'value': [round(r.uniform(-1, 1), 3)] * 512}) + '\n')"
  cp "$work/verify_journal_base.engram" "$work/verify_journal.tmp"
  $E -q append "$work/verify_journal.tmp" --entries "$work/verify_journal.jsonl" > /dev/null
  mv "$work/verify_journal.tmp" "$work/verify_journal.engram"
fi
TIMEFORMAT=%R
timed() { { time "$@" > /dev/null 2>&1; } 2>&1; }
best() { printf '%s\n' "$@" | sort -n | head -n1; }
printf '%-8s %9s %9s %9s %9s %9s\n' shape size xxhsum verify ratio "ratio -t1"
for shape in rows stats fp8 journal; do
  t=$work/verify_$shape.engram
  cat "$t" > /dev/null  # warm
  x=() v=() v1=()
  for ((i = 0; i < runs; i++)); do
    x+=("$(timed xxhsum -H3 "$t")"); v+=("$(timed "$E" -q verify "$t")"); v1+=("$(timed "$E" -q verify -t 1 "$t")")
  done
  awk -v s="$(stat -c %s "$t")" -v x="$(best "${x[@]}")" -v v="$(best "${v[@]}")" -v v1="$(best "${v1[@]}")" -v n="$shape" \
    'BEGIN { printf "%-8s %6.0f MiB %8.3fs %8.3fs %9.2f %9.2f\n", n, s / 2^20, x, v, x / v, x / v1 }'
done
echo "(ratio = xxhsum -H3 time / verify time, all cores; target >= 1.0)"

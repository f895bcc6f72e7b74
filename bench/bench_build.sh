#!/usr/bin/env bash
# build throughput against a memory-bound floor (issue 4), measured in the same run: pre-tokenized
# Zipf input, orders 2..3, 8 heads, 2^20 buckets per sub-table. The floor is a tiny program doing
# the same number of random 8-byte read-modify-writes (tokens x orders x heads) into an array of the
# same total size as the sketch's working set (rows x 16 bytes), with the same threads.
# Targets: counting at >= 50% of the floor, and the whole exact build too (issue 14).
# The VM is noisy: floor, sketch and exact run interleaved REPS times (default 3) and each side's
# best time counts.   bench/bench_build.sh [TOKENS] [THREADS] [REPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=$root/build/bench
mkdir -p "$work"
tokens=${1:-100000000}
threads=${2:-$(nproc)}
reps=${3:-3}
corpus=$work/zipf_$tokens.u32
[[ -f $corpus ]] || /usr/bin/python3 "$root/scripts/gen_zipf.py" "$corpus" "$tokens"
layout=(--vocab-size 100000 --layers 1 --order 3 --heads 8 --buckets 1M --row-dim 8 --dtype bf16 -t "$threads")
rows=$((16 * 1048576))
real_tokens=
sks=() exs=() floors=()
for ((i = 0; i < reps; ++i)); do
  sks+=("$($E -q build --tokens "$corpus" "${layout[@]}" --owners sketch -o "$work/bench_sketch.engram" --json)")
  exs+=("$($E -q build --tokens "$corpus" "${layout[@]}" --owners exact --memory 4G --temp-dir "$work" -o "$work/bench_exact.engram" --json)")
  [[ -n $real_tokens ]] || real_tokens=$(echo "${sks[0]}" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
  floors+=("$("$root/build/bin/memory_floor" $((rows * 16)) $((real_tokens * 16)) "$threads" | cut -d' ' -f1)")
  echo "run $((i + 1))/$reps: floor ${floors[-1]}s" >&2
done
/usr/bin/python3 - "$real_tokens" "$threads" "$reps" "${floors[*]}" "${sks[@]}" "${exs[@]}" <<'PY'
import json, sys
tokens, threads, reps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
floors = [float(x) for x in sys.argv[4].split()]
runs = [json.loads(x) for x in sys.argv[5:]]
sks, exs = runs[:reps], runs[reps:]
floor = min(floors)
ops = tokens * 16
print(f"{tokens/1e6:.0f}M tokens, {ops/1e9:.2f}G random read-modify-writes, {threads} threads, best of {reps} interleaved runs")
print(f"memory floor:            {floor:7.2f}s  ({ops/floor/1e6:.0f}M RMW/s; runs {' '.join(f'{f:.2f}' for f in floors)})")
for name, rs in (("sketch", sks), ("exact --memory 4G", exs)):
    c = min(r["count_seconds"] for r in rs)
    w = min(r["seconds"] for r in rs)
    a = min(r["assign_seconds"] for r in rs)
    rss = max(r["peak_rss_bytes"] for r in rs)
    print(f"build {name:18s} counting {c:7.2f}s = {floor/c:.2f} of the floor (target >= 0.5); "
          f"owners {a:.2f}s; whole build {w:.2f}s = {floor/w:.2f} (target >= 0.5 for exact); "
          f"{tokens/w/1e6:.1f}M tokens/s; peak RSS {rss/2**30:.2f} GiB")
    print("  whole-build runs: " + " ".join(f"{r['seconds']:.2f}" for r in rs))
PY

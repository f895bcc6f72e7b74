#!/usr/bin/env bash
# build throughput against a memory-bound floor (issue 4), measured in the same run: pre-tokenized
# Zipf input, orders 2..3, 8 heads, 2^20 buckets per sub-table. The floor is a tiny program doing
# the same number of random 8-byte read-modify-writes (tokens x orders x heads) into an array of the
# same total size as the sketch's working set (rows x 16 bytes), with the same threads.
# Target: counting at >= 50% of the floor.   bench/bench_build.sh [TOKENS] [THREADS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=$root/build/bench
mkdir -p "$work"
tokens=${1:-100000000}
threads=${2:-$(nproc)}
corpus=$work/zipf_$tokens.u32
[[ -f $corpus ]] || /usr/bin/python3 "$root/scripts/gen_zipf.py" "$corpus" "$tokens"
layout=(--vocab-size 100000 --layers 1 --order 3 --heads 8 --buckets 1M --row-dim 8 --dtype bf16 -t "$threads")
rows=$((16 * 1048576))
sk=$($E -q build --tokens "$corpus" "${layout[@]}" --owners sketch -o "$work/bench_sketch.engram" --json)
ex=$($E -q build --tokens "$corpus" "${layout[@]}" --owners exact --memory 4G --temp-dir "$work" -o "$work/bench_exact.engram" --json)
real_tokens=$(echo "$sk" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
floor=$("$root/build/bin/memory_floor" $((rows * 16)) $((real_tokens * 16)) "$threads" | cut -d' ' -f1)
/usr/bin/python3 - "$sk" "$ex" "$floor" "$real_tokens" "$threads" <<'PY'
import json, sys
sk, ex, floor, tokens, threads = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ops = tokens * 16
print(f"{tokens/1e6:.0f}M tokens, {ops/1e9:.2f}G random read-modify-writes, {threads} threads")
print(f"memory floor:            {floor:7.2f}s  ({ops/floor/1e6:.0f}M RMW/s)")
for name, r in (("sketch", sk), ("exact --memory 4G", ex)):
    c, w = r["count_seconds"], r["seconds"]
    print(f"build {name:18s} counting {c:7.2f}s = {floor/c:.2f} of the floor (target >= 0.5); "
          f"whole build {w:.2f}s = {floor/w:.2f}; {tokens/w/1e6:.1f}M tokens/s; peak RSS {r['peak_rss_bytes']/2**30:.2f} GiB")
PY

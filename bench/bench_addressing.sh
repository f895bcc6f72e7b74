#!/usr/bin/env bash
# Addressing throughput (issue 3): bucket ids of a 10M-token stream in the engram-demo layout
# (DeepSeek-compatible hashing, layers [1,15], orders 2..3, 8 heads), engramctl's C++ against a plain
# vectorised numpy implementation of the reference formula, one thread each, side by side.
# Also checks both produce identical bucket ids on a prefix. Target: ratio >= 30.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/build/bench}
mkdir -p "$work"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
ids=$work/ids10m.u32
[[ -f $ids ]] || /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(0).integers(0, 98627, size=10_000_000).astype('<u4').tofile('$ids')"
args=(--layers 1,15 --max-order 3 --heads 8 --base 646400 --vocab 98627 --pad 2)
head -c 800000 "$ids" > "$work/ids200k.u32"
"$root/build/bin/bench_addressing" --ids "$work/ids200k.u32" "${args[@]}" --out "$work/ours.i64" >/dev/null
/usr/bin/python3 "$root/scripts/reference/engram_hash_ref.py" --ids "$work/ids200k.u32" "${args[@]}" --out "$work/ref.i64"
cmp -s "$work/ours.i64" "$work/ref.i64" && same=identical || same=DIFFERENT
np_best=999
for _ in 1 2; do
  t=$( { /usr/bin/python3 "$root/scripts/reference/engram_hash_ref.py" --ids "$ids" "${args[@]}" --time; } 2>&1 )
  np_best=$(awk -v a="$np_best" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
done
c_best=999
for _ in 1 2 3; do
  t=$("$root/build/bin/bench_addressing" --ids "$ids" "${args[@]}" | cut -d' ' -f1)
  c_best=$(awk -v a="$c_best" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
done
nat=$("$root/build/bin/bench_addressing" --ids "$ids" --mode native --layers 1,15 --max-order 3 --heads 8 --log2-buckets 20 | cut -d' ' -f1)
scalar=$(ENGRAM_NO_AVX512=1 "$root/build/bin/bench_addressing" --ids "$ids" "${args[@]}" | cut -d' ' -f1)
awk -v n="$np_best" -v c="$c_best" -v s="$scalar" -v nat="$nat" -v same="$same" 'BEGIN {
  buckets = 10e6 * 2 * 16
  printf "10M tokens, 2 layers x 2 orders x 8 heads = %.0fM bucket ids; bucket ids vs numpy: %s\n", buckets / 1e6, same
  printf "numpy reference:        %.3fs  %6.1f M buckets/s\n", n, buckets / n / 1e6
  printf "engramctl (deepseek):   %.3fs  %6.1f M buckets/s  ratio %.1f (target >= 30)\n", c, buckets / c / 1e6, n / c
  printf "engramctl (no AVX-512): %.3fs  %6.1f M buckets/s  ratio %.1f\n", s, buckets / s / 1e6, n / s
  printf "engramctl (native XXH3):%.3fs  %6.1f M buckets/s\n", nat, buckets / nat / 1e6
}'

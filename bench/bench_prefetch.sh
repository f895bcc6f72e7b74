#!/usr/bin/env bash
# prefetch against `cat FILE > /dev/null` (the read path's limit) and `vmtouch -t`, cold and warm,
# on the same table, runs interleaved (issue 15 item 7). Prints the median of N runs of each side
# and their ratios. Targets: cold <= 1.2x cat and <= 0.6x vmtouch -t; warm <= 0.2x vmtouch -t.
#   bench/bench_prefetch.sh [WORKDIR] [RUNS] [TABLE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=${1:-$root/build/bench}
runs=${2:-7}
mkdir -p "$work"
t=${3:-$work/prefetch_bench.engram}
[[ -f $t ]] || $E -q build --vocab-size 50000 --layers 1 --order 3 --heads 8 --row-dim 256 --buckets 64K -o "$t"
TIMEFORMAT=%R
timed() { { time "$@" > /dev/null 2>&1; } 2>&1; }  # bash's own clock: no fork around the command
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
cc=() cv=() ce=() wv=() we=()
for ((i = 0; i < runs; i++)); do
  vmtouch -q -e "$t"; cc+=("$(timed cat "$t")")
  vmtouch -q -e "$t"; cv+=("$(timed vmtouch -q -t "$t")")
  vmtouch -q -e "$t"; ce+=("$(timed "$E" -q prefetch "$t")")
  wv+=("$(timed vmtouch -q -t "$t")")
  we+=("$(timed "$E" -q prefetch "$t")")
done
resident=$(vmtouch "$t" | awk '/Resident Pages/ {print $NF}')
awk -v cc="$(median "${cc[@]}")" -v cv="$(median "${cv[@]}")" -v ce="$(median "${ce[@]}")" \
    -v wv="$(median "${wv[@]}")" -v we="$(median "${we[@]}")" -v size="$(stat -c %s "$t")" \
    -v res="$resident" -v runs="$runs" 'BEGIN {
  printf "table %.2f GiB (resident after runs: %s), median of %d interleaved runs\n", size / 2^30, res, runs
  printf "cold: cat %.3fs, vmtouch -t %.3fs, engramctl prefetch %.3fs (%.2f GB/s)\n", cc, cv, ce, size / ce / 1e9
  printf "cold ratio vs cat:        %.2f (target <= 1.2)\n", ce / cc
  printf "cold ratio vs vmtouch -t: %.2f (target <= 0.6)\n", ce / cv
  printf "warm: vmtouch -t %.3fs, engramctl prefetch %.3fs  ratio %.3f (target <= 0.2)\n", wv, we, we / wv
}'

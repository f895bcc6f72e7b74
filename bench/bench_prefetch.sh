#!/usr/bin/env bash
# prefetch against vmtouch -t on the same 4 GiB table (issue 5), side by side, median of 3:
#   cold: the table is evicted from the page cache before each run; target ratio <= 1.0
#   warm: the table is already resident;                               target ratio <= 0.2
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=$root/build/bin/engramctl
work=${1:-$root/build/bench}
mkdir -p "$work"
t=$work/append_big.engram
[[ -f $t ]] || $E -q build --vocab-size 50000 --layers 1 --order 3 --heads 8 --row-dim 256 --buckets 256K -o "$t"
timed() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
cv=() ce=() wv=() we=()
for _ in 1 2 3; do
  vmtouch -e "$t" > /dev/null; cv+=("$(timed vmtouch -t "$t")")
  vmtouch -e "$t" > /dev/null; ce+=("$(timed "$E" -q prefetch "$t")")
  wv+=("$(timed vmtouch -t "$t")")
  we+=("$(timed "$E" -q prefetch "$t")")
done
resident=$(vmtouch "$t" | awk '/Resident Pages/ {print $NF}')
awk -v cv="$(median3 "${cv[@]}")" -v ce="$(median3 "${ce[@]}")" -v wv="$(median3 "${wv[@]}")" -v we="$(median3 "${we[@]}")" \
    -v size="$(stat -c %s "$t")" -v res="$resident" 'BEGIN {
  printf "table %.2f GiB (resident after runs: %s)\n", size / 2^30, res
  printf "cold: vmtouch -t %.3fs (%.2f GB/s), engramctl prefetch %.3fs (%.2f GB/s)  ratio %.2f (target <= 1.0)\n", cv, size / cv / 1e9, ce, size / ce / 1e9, ce / cv
  printf "warm: vmtouch -t %.3fs, engramctl prefetch %.3fs  ratio %.3f (target <= 0.2)\n", wv, we, we / wv
}'

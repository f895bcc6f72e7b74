#!/usr/bin/env bash
# What each row dtype costs on the demo model (issue 34): the demo table converted by
# `engramctl quantize` to every dtype, from its f32 copy (the demo's rows are bf16, so that copy is
# exact). Per dtype: file size, quantize time against `cat` of the source (best of 3, interleaved,
# warm cache), the quality gate on held-out Brown (mean/p99 KL, top-1 agreement, perplexity change,
# row error over all rows and over the rows the text reads), and `run` generation speed (tokens/s,
# 1 thread, best of 3). Then the hot-set curve of held-out Brown on the demo table (text + SVG).
#   bench/bench_quantize.sh [CHECK_TOKENS]   CHECK_TOKENS: held-out tokens the gate scores
#                                            (default 10000; the whole held-out set is ~63,000)
# Needs ./scripts/demo.sh first (the demo table and config).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
E=${ENGRAM_BIN:-$root/build/bin/engramctl}
PY=/usr/bin/python3
check_tokens=${1:-10000}
cfg=$root/examples/demo/config.toml
table=$root/build/demo/engram_weights/ngram_table_v3.bin
heldout=$root/build/assets/brown/heldout.txt
[[ -f $table && -f $heldout ]] || { echo "run ./scripts/demo.sh first" >&2; exit 1; }
work=$(mktemp -d "$root/build/bench_quantize.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$root"
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
min() { sort -g | head -1; }

$E -q quantize "$table" -o "$work/src.f32" --dtype f32 > /dev/null
src=$work/src.f32
printf 'The jury said that\nIn the morning the\nThe city council\nHe was not\n' > "$work/prompts.txt"
gen_speed() {  # gen_speed TABLE: eval tokens/s of greedy generation, 1 thread, best of 3
  for _ in 1 2 3; do
    $E run --config "$cfg" --table "$1" --temp 0 -n 48 -t 1 -f "$work/prompts.txt" --json 2>/dev/null |
      $PY -c "import json,sys; j=json.load(sys.stdin); print(j['eval_tokens'] / j['eval_seconds'])"
  done | sort -g | tail -1
}

echo "demo table, $(stat -c %s "$src") bytes as f32; gate on the first ~$check_tokens tokens of held-out Brown"
printf '%-9s %10s %8s %9s %10s %10s %7s %9s %10s %10s %8s\n' dtype size "time" "x cat" "KL mean" "KL p99" top1 "ppl chg" "err all" "err read" "tok/s"
for d in f32 bf16 f16 fp8-e4m3 int8 int4; do
  out=$work/t.$d
  qt=() ct=()
  for _ in 1 2 3; do  # interleaved: cat of the source, then the conversion
    ct+=("$(secs cat "$src")")
    if [[ $d == f32 ]]; then qt+=("$(secs cp "$src" "$out")"); else qt+=("$(secs $E -q quantize "$src" -o "$out" --dtype $d --force -t 2)"); fi
  done
  q=$(printf '%s\n' "${qt[@]}" | min); c=$(printf '%s\n' "${ct[@]}" | min)
  if [[ $d == f32 ]]; then
    kl="0 0 1 0 0 0"  # the source itself
  else
    rm -f "$out"
    $E quantize "$src" -o "$out" --dtype $d --config "$cfg" --check-corpus "$heldout" \
      --check-max-tokens "$check_tokens" -t 2 --json 2> /dev/null > "$work/q.json"
    kl=$($PY -c "
import json; j=json.load(open('$work/q.json')); c=j['check']
print(c['kl_mean'], c['kl_p99'], c['top1_agreement'], c['perplexity_increase_pct'], j['row_rel_l2_all'], c['row_rel_l2_read'])")
  fi
  read -r klm klp top ppl ea er <<< "$kl"
  tps=$(gen_speed "$out")
  printf '%-9s %10s %7.3fs %8.2fx %10.3g %10.3g %6.2f%% %+8.4f%% %10.3g %10.3g %8.1f\n' \
    "$d" "$(stat -c %s "$out")" "$q" "$(echo "$q / $c" | bc -l)" "$klm" "$klp" "$($PY -c "print(100*$top)")" "$ppl" "$ea" "$er" "$tps"
done
echo
echo "hot set of held-out Brown on the demo table (LRU row cache, exact):"
$E hotset --config "$cfg" --corpus "$heldout" --svg "$root/build/bench_quantize_hotset.svg"
echo "curve drawn in build/bench_quantize_hotset.svg"

#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) in build-fuzz/ and
# runs each for SECONDS (default 600), starting from the seed corpora; new interesting inputs go to
# build-fuzz/corpus/<target>, crashes to build-fuzz/findings/<target>/. Prints exec/s and totals.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${1:-600}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(table_open journal config tokenizer safetensors entries units)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGRAM_FUZZ=ON -DENGRAM_WITH_TORCH=OFF \
  -DENGRAM_SANITIZE=address,undefined -DENGRAM_ASSETS_DIR="$root/build/assets" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null
declare -A seeds=(
  [table_open]="tests/fuzz/corpus/table_open tests/golden/v3"
  [journal]="tests/fuzz/corpus/journal"
  [config]="tests/fuzz/corpus/config schemas examples/demo"
  [tokenizer]="tests/fuzz/corpus/tokenizer"
  [safetensors]="tests/fuzz/corpus/safetensors"
  [entries]="tests/fuzz/corpus/entries"
  [units]="tests/fuzz/corpus/units"
)
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  log=build-fuzz/fuzz_$t.log
  set +e
  ASAN_OPTIONS=detect_leaks=1 "build-fuzz/bin/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=4096 -timeout=20 \
    -max_len=1048576 -artifact_prefix="build-fuzz/findings/$t/" "build-fuzz/corpus/$t" ${seeds[$t]} > "$log" 2>&1
  rc=$?
  set -e
  stats=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW)' "$log" | tail -1)
  execs=$(echo "$stats" | sed -E 's/^#([0-9]+).*/\1/')
  rate=$(echo "$stats" | grep -oE 'exec/s: [0-9]+' | cut -d' ' -f2)
  findings=$(ls "build-fuzz/findings/$t" | wc -l)
  echo "fuzz $t: ${secs}s, ${execs:-0} executions (${rate:-0} exec/s), findings: $findings, exit $rc"
done

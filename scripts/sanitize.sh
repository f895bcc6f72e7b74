#!/usr/bin/env bash
# Builds everything with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs the
# tests there; any sanitizer report fails the run (-fno-sanitize-recover, halt_on_error).
#   sanitize.sh [--quick]   --quick: the unit, fuzz, golden and crash tests only (scripts/test.sh);
#                           without it, every test but gpu, bench and slow (scripts/test_slow.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DENGRAM_SANITIZE=address,undefined -DENGRAM_WITH_TORCH=OFF \
  -DENGRAM_ASSETS_DIR="$PWD/build/assets" >/dev/null
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [[ "${1:-}" == --quick ]]; then
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -L "unit|fuzz|golden|crash"
else
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "gpu|bench|slow"
fi

#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine (as root) it installs what is missing,
# fetches the test assets, builds, runs every test of the main suite with ctest (all labels but
# gpu, bench and slow), builds the CUDA kernels and their parity test when nvcc is present (the
# test skips without a GPU), checks formatting, and runs the unit, fuzz and golden tests again
# under ASan+UBSan. scripts/test_slow.sh runs the rest (the slow label, and every CLI case under
# the sanitizers); CI (.ci/run) runs both. Set ENGRAM_SKIP_SANITIZE=1 to skip the sanitizer pass.
# Prints how long each stage took.
set -euo pipefail
cd "$(dirname "$0")/.."
stage_start=$SECONDS
stage() {  # stage NAME: the time since the last stage
  echo "test.sh: $1 took $((SECONDS - stage_start)) s" >&2
  stage_start=$SECONDS
}
./scripts/install_deps.sh
./scripts/fetch_assets.sh
stage "install and fetch"
./scripts/build.sh
stage "build"
ctest --test-dir build --output-on-failure -j "$(nproc)" -LE "gpu|bench|slow"
stage "ctest"
./scripts/build_cuda.sh
./scripts/format.sh --check
stage "cuda and format"
if [[ "${ENGRAM_SKIP_SANITIZE:-0}" != 1 ]]; then
  ./scripts/sanitize.sh --quick
  stage "sanitizers"
fi
echo "test.sh: all tests passed in $SECONDS s"

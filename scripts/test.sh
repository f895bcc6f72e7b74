#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine (as root) it installs what is missing,
# fetches the test assets, builds, runs every test with ctest, builds the CUDA kernels and their
# parity test when nvcc is present (the test skips without a GPU), checks formatting, and runs the
# whole suite again under ASan+UBSan. Set ENGRAM_SKIP_SANITIZE=1 to skip the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/fetch_assets.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" -LE "gpu|bench"
./scripts/build_cuda.sh
./scripts/format.sh --check
if [[ "${ENGRAM_SKIP_SANITIZE:-0}" != 1 ]]; then
  ./scripts/sanitize.sh
fi
echo "test.sh: all tests passed"

#!/usr/bin/env bash
# The checks scripts/test.sh leaves out to stay within about ten minutes, run after it (CI runs
# both, .ci/run): the ctest cases labelled slow (the C++ model against the PyTorch reference on
# three models, the longest append --fit cases), the CUDA kernels and their parity test (when nvcc
# is present), and every test of the sanitizer build, CLI cases included. Expects scripts/test.sh
# to have built build/. Set ENGRAM_SKIP_SANITIZE=1 to skip the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
ctest --test-dir build --output-on-failure -j "$(nproc)" -L slow
echo "test_slow.sh: slow label took $((SECONDS - start)) s" >&2
./scripts/build_cuda.sh
if [[ "${ENGRAM_SKIP_SANITIZE:-0}" != 1 ]]; then
  ./scripts/sanitize.sh
fi
echo "test_slow.sh: all tests passed in $((SECONDS - start)) s"

#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine (as root) it installs what is missing,
# fetches the test assets, builds, runs every test of the main suite with ctest (all labels but
# gpu, bench and slow) and checks formatting, within about ten minutes on 2 cores. The rest runs
# in scripts/test_slow.sh: the slow label, the CUDA kernels and their parity test (when nvcc is
# present; the test skips without a GPU), and the unit, fuzz, golden, crash and CLI tests under
# ASan+UBSan. CI (.ci/run) runs both, so no check is dropped. Prints how long each stage took.
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
./scripts/format.sh --check
stage "format"
echo "test.sh: all tests passed in $SECONDS s"

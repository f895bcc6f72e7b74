#!/usr/bin/env bash
# Builds the CUDA kernels (kernels/), their parity test and the device benchmark into build-cuda/
# and runs the gpu-labelled tests, which skip with a message when no GPU is usable. Does nothing
# (and says so) when nvcc is absent: CUDA is optional. NVCC=/path/to/nvcc picks another nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
if [[ ! -x "$nvcc" ]]; then
  nvcc="$(command -v nvcc || true)"
fi
if [[ -z "$nvcc" ]]; then
  echo "build_cuda.sh: no nvcc (looked at /usr/local/cuda/bin/nvcc and PATH): CUDA kernels not built"
  exit 0
fi
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGRAM_WITH_CUDA=ON -DENGRAM_WITH_TORCH=OFF \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DENGRAM_ASSETS_DIR="$PWD/build/assets" "$@" >/dev/null
cmake --build build-cuda -j "$(nproc)" --target kernels_test bench_gpu
ctest --test-dir build-cuda --output-on-failure -L gpu

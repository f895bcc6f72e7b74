#!/usr/bin/env bash
# Formats (or with --check, checks) every C++ source with the project's .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' 2>/dev/null || true)
if [[ ${#files[@]} -eq 0 ]]; then mapfile -t files < <(find apps lib kernels tests bench -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' 2>/dev/null); fi
if [[ "${1:-}" == "--check" ]]; then
  clang-format --dry-run -Werror "${files[@]}"
else
  clang-format -i "${files[@]}"
fi

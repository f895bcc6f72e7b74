#!/usr/bin/env bash
# The README's demo: on a fresh Debian 12 machine (as root) it installs what is missing, builds
# engramctl, makes an Engram table from the Brown corpus with the real DeepSeek-V3 tokenizer,
# verifies it, inspects it and looks a few n-grams up.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/fetch_assets.sh
./scripts/build.sh
E=build/bin/engramctl
A=build/assets
out=build/demo
mkdir -p "$out"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step $E build --tokenizer $A/deepseek_v3/tokenizer.json --corpus $A/brown/train.txt \
  --layers 1,3 --order 3 --heads 8 --buckets 131072 --row-dim 16 --dtype bf16 --pad-id 2 \
  --init normal --seed 1 -o $out/brown.engram
step $E verify $out/brown.engram --tokenizer $A/deepseek_v3/tokenizer.json
step $E inspect $out/brown.engram --stats
echo
echo "demo.sh: done. The table is $out/brown.engram."

#!/usr/bin/env bash
# Regenerates assets/demo-model (the trained MoE+Engram demo model) from scratch:
#   ./scripts/model/train_demo.sh [OUT_DIR [TRAIN_OPTIONS...]]   (~40 min on 2 cores)
# TRAIN_OPTIONS go to scripts/model/train.py after the demo's own (e.g. --max-ngram 3).
# Steps: tokenize the Brown training text with the real DeepSeek-V3 tokenizer (engramctl tokenize),
# train with the PyTorch reference (scripts/model/train.py), compress model.safetensors with zstd.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/assets/demo-model}
shift $(($# > 0 ? 1 : 0))
E=$root/build/bin/engramctl
A=$root/build/assets
T=$A/deepseek_v3/tokenizer.json
work=$root/build/train
mkdir -p "$work" "$out"
$E -q tokenize --tokenizer "$T" -f "$A/brown/train.txt" --lines -o "$work/ids.u32"
$E -q tokenize --tokenizer "$T" -f "$A/brown/train.txt" --lines --canonical -o "$work/canon.u32"
pad=$(printf '<｜▁pad▁｜>' | $E tokenize --tokenizer "$T" --canonical)
fp=$($E tokenize --tokenizer "$T" --info --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['fingerprint'])")
# Each step allocates ~1 GB of full-vocabulary logits; with 4 KiB pages the kernel spends a third
# of the CPU zeroing and faulting them in, so ask glibc's malloc for transparent huge pages.
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 OMP_NUM_THREADS=2 /usr/bin/python3 "$root/scripts/model/train.py" --ids "$work/ids.u32" --canon "$work/canon.u32" \
  --pad-canonical "$pad" --fingerprint "$fp" --threads 2 --seed 1 --out "$work/model" "$@"
cp "$work/model/config.json" "$out/config.json"
zstd -q -19 -f "$work/model/model.safetensors" -o "$out/model.safetensors.zst"
echo "train_demo: wrote $out ($(du -sh "$out" | cut -f1))"

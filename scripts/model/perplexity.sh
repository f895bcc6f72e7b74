#!/usr/bin/env bash
# Held-out Brown perplexity of the demo model with its Engram table and with --no-engram
# (issue 6: the table must matter). Run ./scripts/demo.sh first (it assembles the model and table).
#   scripts/model/perplexity.sh [CONFIG] [HELDOUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
E=build/bin/engramctl
cfg=${1:-examples/demo/config.toml}
text=${2:-build/assets/brown/heldout.txt}
with=$($E -q run --config "$cfg" --perplexity -f "$text" -t "$(nproc)")
without=$($E -q run --config "$cfg" --perplexity -f "$text" -t "$(nproc)" --no-engram)
echo "held-out Brown ($(wc -l < "$text") texts), demo model:"
echo "  with the Engram table: $with"
echo "  --no-engram:           $without"

#!/usr/bin/env bash
# Whether base::Json may move onto nlohmann::json (issue 13: only if loading the DeepSeek-V3
# tokenizer.json gets no more than 1.5x slower): both parsers on that file, and Tokenizer::Load
# with nlohmann's parse time in place of ours. Best of 7 runs each, interleaved.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/build/bin/bench_json" "$root/build/assets/deepseek_v3/tokenizer.json" "${1:-7}"

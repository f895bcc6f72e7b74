#!/usr/bin/env bash
# Every golden table of every supported version must open, verify, and dump exactly as recorded.
#   check_golden.sh ENGRAMCTL GOLDEN_DIR
set -euo pipefail
E=$1
fail=0
for dir in "$2"/v*/; do
  for t in "$dir"*.engram; do
    name=$(basename "$t")
    want="${t%.engram}.inspect.json"
    got=$(cd "$dir" && "$E" inspect "$name" --stats --json)
    if [[ "$got" != "$(cat "$want")" ]]; then
      echo "golden: $t dumps differently from $want:"; diff <(echo "$got") "$want" | head -5; fail=1
    fi
    if ! (cd "$dir" && "$E" -q verify "$name" >/dev/null); then echo "golden: $t fails verify"; fail=1; fi
    facts="${t%.engram}.facts.json"  # the fact ledger (v3.2)
    if [[ -f "$facts" ]] && [[ "$(cd "$dir" && "$E" -q facts "$name" --json)" != "$(cat "$facts")" ]]; then
      echo "golden: $t lists its facts differently from $facts"; fail=1
    fi
  done
done
exit $fail

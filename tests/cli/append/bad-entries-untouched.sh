source $SRC/tests/cli/lib.sh
tiny_table t.engram
cp t.engram before.engram
printf '{"canonical_ids": [1, 2], "value": [1]}\n' > bad.jsonl
$E append t.engram --entries bad.jsonl 2>/dev/null || true
cmp t.engram before.engram && echo untouched

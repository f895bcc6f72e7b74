# Bad entries are rejected with line numbers before anything is written.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
cp t.engram before.engram
{
  entry "[1, 2]" 1.0
  echo '{"canonical_ids": [1, 2], "value": [1.0, 2.0]}'
  entry "[1, 2]" 1.0 '{"layer": 7}'
  printf '{"text": "", "value": [1]}\n'
  printf '{"canonical_ids": [1, 2], "value": [1], "colour": "red"}\n'
  printf '{"canonical_ids": [1, 2, 3, 4, 5], "value": [1]}\n'
  printf '{"text": "\xff\xfe", "value": [1]}\n'
  echo 'not json'
} > bad.jsonl
$E append t.engram --entries bad.jsonl

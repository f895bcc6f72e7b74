source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[5, 6]" 1.5 > e.jsonl
$E -q append t.engram --entries e.jsonl
$E sort-buckets t.engram -o folded.engram --json
$E inspect t.engram --json | $PY -c "import json,sys; print('original keeps its journal:', json.load(sys.stdin)['journal']['entries'])"
$E sort-buckets t.engram --json
$E sort-buckets t.engram --json
$E -q verify t.engram > /dev/null && $E -q verify folded.engram > /dev/null && echo verified

source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[5, 6]" 1.5 > e.jsonl
$E -q append t.engram --entries e.jsonl
$E sort-buckets t.engram -o folded.engram --json
$E inspect t.engram --json | $PY -c "import json,sys; print('original keeps its journal:', json.load(sys.stdin)['journal']['entries'])"
$E sort-buckets t.engram --json
$E sort-buckets t.engram --json
$E -q verify t.engram > /dev/null && $E -q verify folded.engram > /dev/null && echo verified
# A format 3.1 table (no fact ledger) is rewritten as 3.2 even with nothing to fold, once.
cp $SRC/tests/golden/v3.1/nostats_f16.engram old.engram
$E inspect old.engram --json | $PY -c "import json,sys; print('before:', json.load(sys.stdin)['version'])"
$E sort-buckets old.engram --json
$E sort-buckets old.engram 2>&1 | sed 's/ in [0-9.]*m\?s;/;/'
$E inspect old.engram --json | $PY -c "import json,sys; print('after:', json.load(sys.stdin)['version'])"

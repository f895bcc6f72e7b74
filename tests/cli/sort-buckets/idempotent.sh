source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[5, 6]" 1.5 > e.jsonl
$E -q append t.engram --entries e.jsonl
nosecs() { sed 's/,"seconds":[0-9.]*//'; }
$E sort-buckets t.engram -o folded.engram --json | nosecs
$E inspect t.engram --json | $PY -c "import json,sys; print('original keeps its journal:', json.load(sys.stdin)['journal']['entries'])"
# In place: the same file, a few pages written, no temp file, the journal gone.
ino=$(stat -c %i t.engram)
$E sort-buckets t.engram --json | nosecs | sed 's/"bytes_written":[0-9]*/"bytes_written":N/'
[[ $(stat -c %i t.engram) == "$ino" ]] && echo "same file"
[[ $(tail -c +4097 t.engram | head -c 4096 | tr -d '\0' | wc -c) == 0 ]] && echo "slot page zero, as in a new file"
$E sort-buckets t.engram --json | nosecs
$E -q verify t.engram > /dev/null && $E -q verify folded.engram > /dev/null && echo verified
ls | grep -c 'tmp' || true
# A format 3.1 table (no fact ledger) is rewritten in the current format (3.3 or later) even with
# nothing to fold, once.
cp $SRC/tests/golden/v3.1/nostats_f16.engram old.engram
$E inspect old.engram --json | $PY -c "import json,sys; print('before:', json.load(sys.stdin)['version'])"
$E sort-buckets old.engram --json | nosecs
$E sort-buckets old.engram 2>&1 | sed 's/ in [0-9.]*m\?s;/;/'
$E inspect old.engram --json | $PY -c "import json,sys; print('after:', json.load(sys.stdin)['version'])"
# --rewrite: a new file (compaction), renamed over the table.
$E -q append t.engram --entries e.jsonl
ino=$(stat -c %i t.engram)
$E sort-buckets t.engram --rewrite --json | nosecs
[[ $(stat -c %i t.engram) != "$ino" ]] && echo "rewritten as a new file"
$E -q verify t.engram > /dev/null && echo verified

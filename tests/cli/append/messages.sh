# Messages (issue 15 item 8): one bad line is one bad entry (no spurious "FILE:0: no entries"); a
# writer waiting for the lock says whose lock it is and that it waits; --dry-run does not claim
# entries now await sort-buckets.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
echo '{"canonical_ids": [1, 2], "value": "oops"}' > bad.jsonl
set +e
$E append t.engram --entries bad.jsonl 2> err.txt; echo "exit $?"
set -e
cat err.txt
entry "[1,4]" 0.5 > e.jsonl
$E append t.engram --entries e.jsonl --dry-run 2>&1 >/dev/null | grep -o 'nothing was written (--dry-run)'
flock t.engram sleep 2 &
holder=$!
sleep 0.5
$E append t.engram --entries e.jsonl 2> err.txt > /dev/null
wait $holder
grep -o "the write lock is held by pid [0-9]* (flock t.engram sleep 2); append waits for it" err.txt | sed 's/pid [0-9]*/pid N/'

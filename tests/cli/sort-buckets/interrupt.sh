# SIGINT/SIGTERM during a fold: one line saying whether the table is unchanged or folded, exit
# 130/143, nothing left behind. Before the fold record is written the fold is undone; after it,
# the fold is finished (it is short) and then reported.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
for i in 1 2 3; do entry "[5, $i]" "1.$i"; done > e.jsonl
$E -q append t.engram --entries e.jsonl > /dev/null
cp t.engram orig.engram
entries() { $E inspect "$1" --json | grep -o '"journal":{"entries":[0-9]*' | grep -o '[0-9]*$'; }
run() { local rc=0; "$@" 2> err.txt || rc=$?; echo "exit $rc: $(sed 's|^engramctl sort-buckets: [^:]*: ||' err.txt)"; }
# A signal while the new metadata is staged (step 1): undone.
ENGRAM_TEST_FOLD_KILL_AT=1 ENGRAM_TEST_FOLD_KILL_SIGNAL=15 run $E -q sort-buckets t.engram
cmp t.engram orig.engram && echo "byte for byte as before; journal $(entries t.engram)"
ENGRAM_TEST_FOLD_KILL_AT=3 ENGRAM_TEST_FOLD_KILL_SIGNAL=2 run $E -q sort-buckets t.engram
cmp t.engram orig.engram && echo "byte for byte as before"
# After the fold record (step 5: pages being written): finished, then reported.
ENGRAM_TEST_FOLD_KILL_AT=6 ENGRAM_TEST_FOLD_KILL_SIGNAL=2 run $E -q sort-buckets t.engram
echo "journal $(entries t.engram)"; $E -q verify t.engram > /dev/null && echo verified
# Waiting for another writer's lock: Ctrl-C stops the wait; --rewrite leaves no temp file.
cp orig.engram t.engram
flock t.engram sleep 5 & holder=$!
trap 'kill $holder 2>/dev/null || true' EXIT
sleep 0.3
$E -q sort-buckets t.engram --rewrite 2> err.txt & fold=$!
sleep 0.5; kill -INT $fold
rc=0; wait $fold || rc=$?
echo "exit $rc: $(sed 's|^engramctl sort-buckets: [^:]*: ||' err.txt)"
cmp t.engram orig.engram && echo "byte for byte as before"
ls | grep -c 'tmp\.' || true

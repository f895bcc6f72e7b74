# A second writer waits for the lock; --no-wait fails at once with a clear message.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[3, 4]" 0.5 > e.jsonl
flock t.engram sleep 1.5 &
sleep 0.3
code=0; $E append t.engram --entries e.jsonl --no-wait 2> nowait.txt || code=$?
echo "--no-wait: exit $code"
cat nowait.txt
start=$(date +%s.%N)
$E -q append t.engram --entries e.jsonl > /dev/null
waited=$(echo "$(date +%s.%N) - $start > 0.5" | bc)
echo "waiting append: exit $?, waited for the lock: $waited"
wait

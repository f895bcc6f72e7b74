# --lock pins the table until interrupted, like vmtouch -l.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
$E prefetch t.engram --lock 2> lock.txt &
pid=$!
for _ in $(seq 50); do grep -q 'locked in memory' lock.txt && break; sleep 0.1; done
kill -INT $pid
wait $pid
tail -n 2 lock.txt | sed 's/[0-9.]* KiB/N KiB/'

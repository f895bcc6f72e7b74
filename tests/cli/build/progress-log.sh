# Progress goes to a log (stderr not a TTY) as plain lines, every ENGRAM_PROGRESS_INTERVAL seconds.
source $SRC/tests/cli/lib.sh; tiny_tokens t.u32
ENGRAM_PROGRESS_INTERVAL=0 $E build --tokens t.u32 --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 8 -o t.engram 2>log
grep -Eq '^count n-grams: +[0-9.]+%' log || { cat log; exit 1; }
if grep -q $'\r' log; then echo "carriage return in a log"; exit 1; fi
# Without the variable, a run this short writes no progress line at all.
$E build --tokens t.u32 --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 8 -o u.engram 2>log2
if grep -q 'count n-grams' log2; then cat log2; exit 1; fi
ENGRAM_PROGRESS_INTERVAL=soon $E -q build --tokens t.u32 --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 8 -o v.engram 2>log3
grep -q 'ENGRAM_PROGRESS_INTERVAL=soon is not a number of seconds; using 60' log3 || { cat log3; exit 1; }
echo ok

# Paths (issue 15 item 4): a FIFO is refused at once by every file input that is read by offset
# instead of blocking in open(); entries, read front to back, are taken from a FIFO with a writer
# (issue 32: --entries <(cmd)); sort-buckets folds a symlinked table where it lives and writes -o from a read-only
# table; lookup names a missing table file.
source $SRC/tests/cli/lib.sh
tiny_table real.engram
entry "[1,4]" 0.5 > a.jsonl
$E -q append real.engram --entries a.jsonl > /dev/null
mkfifo p
run() { set +e; timeout 10 "$@" > out.txt 2> err.txt; rc=$?; set -e; echo "exit $rc: $(grep -c 'named pipe (FIFO)' err.txt)"; }
run $E verify p
run $E inspect p
run $E lookup p --ids 1,2
run $E append p --entries a.jsonl
run $E export p -o x
cat a.jsonl > p &
run $E append real.engram --entries p
wait
run $E build --tokens p --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 32 -o y.engram
run $E verify real.engram --config p
ln -s real.engram link.engram
$E -q sort-buckets link.engram
test -L link.engram && echo "link kept"
$E verify real.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('real folded:', d['ok'], d['journal_entries'])"
$E -q append real.engram --entries a.jsonl > /dev/null
chmod a-w real.engram
$E -q sort-buckets real.engram -o new.engram && echo "folded a read-only table to -o"
$E verify new.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('new:', d['ok'], d['journal_entries'])"
set +e; $E lookup missing.engram --ids 1,2 2> err.txt; echo "exit $?"; set -e
grep -o 'missing.engram: no such table file' err.txt

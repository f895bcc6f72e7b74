# Short of memory, the message says what failed and what to change (issue 32): under ulimit -v,
# run refused to load libtorch with "built without libtorch ... rebuild", or aborted inside it
# ("terminate called without an active exception", exit 134). Now it names the address-space
# limit and exits 1 before loading; a table mapping that fails names its size and the limit.
source $SRC/tests/cli/lib.sh
printf '[model]\npath = "nowhere"\n' > c.toml
set +e
(ulimit -v 300000; $E run --config c.toml "hello" > /dev/null 2> err.txt); echo "run: exit $?"
set -e
grep -o 'the model module (libtorch) needs about 1.0 GiB of address space' err.txt
grep -o 'the address-space limit (ulimit -v) is 293.0 MiB' err.txt
grep -c 'rebuild\|terminate' err.txt || true
tiny_table t.engram
$PY -c "import os; f=open('big.engram','wb'); f.write(open('t.engram','rb').read()); f.truncate(400 << 20)"
set +e
(ulimit -v 200000; $E lookup big.engram --canonical-ids 1,2 > /dev/null 2> err.txt); echo "lookup: exit $?"
set -e
sed -E 's/is [0-9.]+ [MG]iB in use/is N in use/; s/of which [0-9.]+ [KMG]iB/of which N/' err.txt | grep -o 'mapping its 400.0 MiB failed: not enough address space; the address-space limit (ulimit -v) is 195.3 MiB, of which N is in use' || cat err.txt

source $SRC/tests/cli/lib.sh
tiny_table a.engram --init normal --seed 7 -t 1
tiny_table b.engram --init normal --seed 7 -t 2
$E inspect a.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); assert d['total_rows']==256, d"
# same seed, any thread count: the same rows
cmp <(dd if=a.engram bs=4096 skip=2 count=8 2>/dev/null) <(dd if=b.engram bs=4096 skip=2 count=8 2>/dev/null)

source $SRC/tests/cli/lib.sh
tiny_table t.engram
$E inspect t.engram --stats --json | $PY -c "
import json,sys; d=json.load(sys.stdin)
print(d['addressing'], d['max_order'], d['n_heads'], d['total_rows'], d['journal']['entries'], d['stats']['owned_rows'] > 0)"

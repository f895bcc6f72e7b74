source $SRC/tests/cli/lib.sh
tiny_table t.engram
$E prefetch t.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('warm: all resident', d['resident_bytes']==d['bytes'])"
$E prefetch t.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('second warm reads nothing', d['read_bytes']==0)"
$E prefetch t.engram --status --json | $PY -c "
import json,sys; d=json.load(sys.stdin); print('status parts:', [p['name'] for p in d['parts']])"
$E prefetch t.engram --evict > /dev/null 2>&1
$E prefetch t.engram --status | head -1 | grep -q 'resident' && echo 'status after evict reported'

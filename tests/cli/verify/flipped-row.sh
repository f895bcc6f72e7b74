source $SRC/tests/cli/lib.sh
tiny_table t.engram
rows=$($E inspect t.engram --json | $PY -c "import json,sys; print([s['offset'] for s in json.load(sys.stdin)['sections'] if s['name']=='ROWS'][0])")
flip_byte t.engram $((rows + 808))
$E verify t.engram --json > out.json || code=$?
$PY -c "
import json; d=json.load(open('out.json'))
assert not d['ok'] and d['problems'][0]['field']=='section ROWS chunk 0', d
print(d['problems'][0]['message'])"
exit ${code:-0}

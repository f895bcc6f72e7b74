source $SRC/tests/cli/lib.sh
tiny_table t.engram
flip_byte t.engram 9000
$E verify t.engram --json > out.json || code=$?
$PY -c "
import json; d=json.load(open('out.json'))
assert not d['ok'] and d['problems'][0]['field']=='section ROWS chunk 0', d
print(d['problems'][0]['message'])"
exit ${code:-0}

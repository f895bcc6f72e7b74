# append -> lookup hit with the new value; deterministic loads refused until sort-buckets, then
# they succeed with the same values.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[9, 10, 11]" 0.25 > e.jsonl
$E -q append t.engram --entries e.jsonl
printf '[engram]\nngram_order = 3\nhash_buckets = 64\nn_heads = 2\nembed_dim = 64\nlayer_ids = [1]\ndeterministic_addressing = true\n' > det.toml
$E lookup t.engram --canonical-ids 9,10,11 --json --values > before.json
code=0; $E lookup --config det.toml t.engram --canonical-ids 9,10,11 2> refused.txt || code=$?
echo "deterministic load before fold: exit $code: $(grep -o 'deterministic addressing requires sorted bucket ids' refused.txt)"
code=0; $E verify t.engram --config det.toml > verify.txt || code=$?
echo "verify --config before fold: exit $code"
$E -q sort-buckets t.engram
$E lookup --config det.toml t.engram --canonical-ids 9,10,11 --json --values > after.json
$E -q verify t.engram --config det.toml > /dev/null && echo "verify --config after fold: exit 0"
$PY - <<'PY'
import json
b = json.load(open('before.json')); a = json.load(open('after.json'))
def last(d): return d['positions'][2]['layers'][0]['orders'][1]
print('hit before', all(last(b)['hit']), 'values', last(b)['values'][0][:2])
print('hit after ', all(last(a)['hit']), 'same values', last(a)['values'] == last(b)['values'])
PY

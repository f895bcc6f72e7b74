# append --fit onto a table whose in-place fold was killed half way: the fold is completed first
# (before the model maps the table, whose reader lock the completion would otherwise wait for),
# then the fit is journalled on the folded base, and the table verifies.
source $SRC/tests/cli/lib.sh
demo_model m
entry "[5, 6]" 0.5 | $PY -c "import json,sys; d=json.load(sys.stdin); d['value']=d['value'][:16]; print(json.dumps(d))" > v.jsonl
$E -q append m.engram --entries v.jsonl > /dev/null
rc=0; ENGRAM_TEST_FOLD_KILL_AT=8 $E -q sort-buckets m.engram 2>/dev/null || rc=$?
echo "fold killed: exit $rc"
$E -q verify m.engram > /dev/null || echo "verify before completing: problems found"
printf '%s\n' '{"prompt": "The capital of Zorvania is", "target": " Quellport"}' > f.jsonl
timeout 600 $E -q append --config m.toml --entries f.jsonl > /dev/null 2> err.txt; echo "append --fit: exit $?"
$E inspect m.engram --json | $PY -c "import json,sys; j=json.load(sys.stdin); print('journal entries:', j['journal']['entries'] > 0, '| ledger:', j['ledger'])"
$E -q sort-buckets m.engram && $E -q verify m.engram > /dev/null && echo verified

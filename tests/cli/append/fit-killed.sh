# A killed append --fit writes nothing or everything of its batch: SIGKILL in the middle of the
# journal write leaves an uncommitted tail that no reader sees (run answers as before, the next
# append drops it); SIGKILL after the commit's fsync keeps every fitted row.
source $SRC/tests/cli/lib.sh
demo_model m
printf '{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' > fact.jsonl
answer() { $E run --config m.toml --temp 0 -n 3 -t 1 "The capital of Zorvania is" 2>/dev/null; echo; }
journal() { $E inspect m.engram --json | $PY -c "import json,sys; j=json.load(sys.stdin)['journal']; print('journal: entries', j['entries'], 'commits', j['commits'], 'torn tail', j['tail_bytes'] > 0)"; }
$E append --config m.toml --entries fact.jsonl -t 1 --dry-run --json > dry.json 2>/dev/null
rows=$($PY -c "import json; print(json.load(open('dry.json'))['fit']['rows_written'])")
answer
code=0; ENGRAM_CRASH_AT=append-torn $E append --config m.toml --entries fact.jsonl -t 1 > /dev/null 2>&1 || code=$?
echo "killed mid-write: exit $code"
journal
answer
$E verify m.engram > /dev/null && echo "verify: OK"
code=0; ENGRAM_CRASH_AT=append-before-slot $E append --config m.toml --entries fact.jsonl -t 1 > /dev/null 2> killed.log || code=$?
echo "killed after the commit: exit $code"
grep -c 'dropping an uncommitted journal tail' killed.log
$E inspect m.engram --json | $PY -c "import json,sys; j=json.load(sys.stdin)['journal']; print('every fitted row committed:', j['entries'] == $rows, 'commits', j['commits'], 'torn tail', j['tail_bytes'] > 0)"
answer
$E verify m.engram > /dev/null && echo "verify: OK"

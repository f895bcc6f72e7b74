# A copy cut short after an earlier commit (an interrupted cp/rsync) is an incomplete copy, not a
# crash: every command refuses it, nothing is dropped (issue 15 item 2, commit slots §5.6).
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[1,4]" 0.5 > a.jsonl
entry "[2,5]" 0.25 > b.jsonl
$E -q append t.engram --entries a.jsonl > /dev/null
one=$(stat -c %s t.engram)
$E -q append t.engram --entries b.jsonl > /dev/null
head -c "$one" t.engram > copy.engram   # the copy ends exactly after the first commit
for cmd in "verify copy.engram" "append copy.engram --entries b.jsonl" "sort-buckets copy.engram" "lookup copy.engram --canonical-ids 1,4"; do
  set +e; $E $cmd > out.txt 2> err.txt; rc=$?; set -e
  echo "${cmd%% *}: exit $rc"
done
cmp -s copy.engram <(head -c "$one" t.engram) && echo "copy unchanged"
$E verify copy.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print(d['problems'][0]['message'].split(':')[0])"

# Readers beside a writer (issue 32): verify, inspect and lookup run in a loop while 100 appends
# commit to the same table; none may report a problem (each reader sees the table as of one
# moment: an append that commits while it reads is not damage), and the table ends with every
# entry. Bounded: the reader loop stops when the appends do (at most 60 s).
source $SRC/tests/cli/lib.sh
tiny_table t.engram
entry "[1,4]" 0.5 '{"layer": 1, "head": 0}' > a.jsonl
( for i in $(seq 100); do $E -q append t.engram --entries a.jsonl > /dev/null || echo "append $i failed"; done; touch done ) &
writer=$!
trap 'kill $writer 2> /dev/null || true' EXIT
reads=0 bad=0
end=$((SECONDS + 60))
while [[ ! -e done && $SECONDS -lt $end ]]; do
  for cmd in "verify t.engram" "inspect t.engram" "lookup t.engram --canonical-ids 1,4"; do
    if ! $E $cmd > out.txt 2> err.txt; then
      bad=$((bad + 1)); echo "problem from '$cmd':"; cat out.txt err.txt | head -n 3
    fi
    reads=$((reads + 1))
  done
done
wait $writer
echo "readers beside appends: $([[ $reads -ge 30 ]] && echo "at least 30 reads") with $bad problem(s)"
$E verify t.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('after:', d['ok'], d['journal_entries'], 'entries')"

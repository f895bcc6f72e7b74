# The in-place fold killed (SIGKILL) at every write and fsync of its protocol
# (schemas/table_format.md §5.8), then: the killed run's recovery killed at each of its own steps;
# an append onto the killed table; a header torn as a power loss would tear it. After every kill
# the table must read as the state before the fold or after it (all rows and owners as they were
# looked up before), and after a rerun of sort-buckets it must verify, hold no journal, and be the
# size of a table folded without a crash.
source $SRC/tests/cli/lib.sh
export ENGRAM_TEST_FOLD_PAGE_BATCH=3  # rows' pages patched in small batches, so steps cross batches
journal() { $E inspect "$1" --json | grep -o '"journal":{"entries":[0-9]*' | grep -o '[0-9]*$'; }
tiny_table base.engram
for i in 1 2 3 4 5 6; do entry "[5, $i]" "1.$i"; done > e1.jsonl
{ entry "[7, 8, 9]" 2.5; entry "[5, 2]" 3.5; entry "[9, 9]" 4.5; } > e2.jsonl
entry "[11, 12, 13]" 6.5 > e3.jsonl
$E -q append base.engram --entries e1.jsonl > /dev/null
$E -q append base.engram --entries e2.jsonl > /dev/null
n=$(journal base.engram)
IDS=5,1,5,2,5,3,5,4,5,5,5,6,7,8,9,9,9,11,12,13
digest() {  # every looked-up row's owner and values (and, with "all", every row's values)
  $E lookup "$1" --canonical-ids $IDS --json --values | md5sum | cut -c1-32
  if [[ ${2:-} == all ]]; then $E -q export "$1" -o "$1.st" && md5sum < "$1.st" | cut -c1-32 && rm -f "$1.st"; fi
}
cp base.engram ref.engram && $E -q sort-buckets ref.engram --rewrite
want=$(digest base.engram) want_all=$(digest base.engram all)
[[ "$(digest ref.engram all)" == "$want_all" ]] || { echo "the rewrite changed what readers see"; exit 1; }
cp base.engram ref3.engram && $E -q append ref3.engram --entries e3.jsonl > /dev/null && $E -q sort-buckets ref3.engram
want3=$(digest ref3.engram all)
cp base.engram clean.engram && $E -q sort-buckets clean.engram
size=$(stat -c %s clean.engram)
steps=$(cp base.engram c.engram && ENGRAM_TEST_FOLD_STEPS=1 $E -q sort-buckets c.engram 2>&1 | grep -c 'fold step')
echo "steps in one fold: $([[ $steps -ge 15 ]] && echo 15 or more)"
trials=0 bad=0
fail() { echo "FAIL: $*"; bad=$((bad + 1)); }
readable() {  # readable TABLE WHAT [all]: the table reads as the state before or after the fold
  if [[ ${3:-} == all ]]; then
    [[ "$(digest "$1" all)" == "$want_all" ]] || fail "$2: rows differ from before and after the fold"
  else
    [[ "$(digest "$1")" == "$want" ]] || fail "$2: rows differ from before and after the fold"
  fi
  local j; j=$(journal "$1")
  [[ $j == "$n" || $j == 0 ]] || fail "$2: journal holds $j entries"
}
finished() {  # finished TABLE WHAT [all]: after a rerun, the table is the folded one
  $E -q sort-buckets "$1" 2>/dev/null || fail "$2: rerun failed"
  $E -q verify "$1" > /dev/null || fail "$2: verify failed after the rerun"
  if [[ ${3:-} == all ]]; then
    [[ "$(digest "$1" all)" == "$want_all" ]] || fail "$2: rows differ after the rerun"
  else
    [[ "$(digest "$1")" == "$want" ]] || fail "$2: rows differ after the rerun"
  fi
  [[ $(stat -c %s "$1") == "$size" ]] || fail "$2: $(stat -c %s "$1") bytes, a clean fold leaves $size"
}
for ((k = 1; k <= steps; k++)); do
  cp base.engram k.engram
  rc=0; ENGRAM_TEST_FOLD_KILL_AT=$k $E -q sort-buckets k.engram 2>/dev/null || rc=$?
  [[ $rc == 137 ]] || fail "step $k: exit $rc, not killed"
  name=$(cp base.engram n.engram && ENGRAM_TEST_FOLD_STEPS=1 $E -q sort-buckets n.engram 2>&1 | sed -n "s/^\[test\] fold step $k: //p")
  trials=$((trials + 1)); readable k.engram "kill at $k ($name)" all
  # The recovery killed at each of its steps, then completed.
  rsteps=$(cp k.engram r.engram && ENGRAM_TEST_FOLD_STEPS=1 $E -q sort-buckets r.engram 2>&1 | grep -c 'fold step' || true)
  for ((j = 1; j <= rsteps; j++)); do
    cp k.engram r.engram
    ENGRAM_TEST_FOLD_KILL_AT=$j $E -q sort-buckets r.engram 2>/dev/null || true
    trials=$((trials + 1)); readable r.engram "kill at $k, then at $j of the recovery"
    finished r.engram "kill at $k, then at $j of the recovery"
  done
  # An append onto the killed table completes the fold first, then journals on the folded base.
  cp k.engram a.engram
  $E -q append a.engram --entries e3.jsonl > /dev/null 2>&1 || fail "kill at $k: append failed"
  $E -q sort-buckets a.engram && $E -q verify a.engram > /dev/null || fail "kill at $k: append then fold failed"
  trials=$((trials + 1)); [[ "$(digest a.engram all)" == "$want3" ]] || fail "kill at $k: append then fold lost rows"
  # A power loss tearing the header while it is written: readers take the fold record's copy.
  if [[ $name == "pages synced" || $name == "header written" || $name == "record state 2 synced" ]]; then
    cp k.engram h.engram
    $PY -c "
import sys
b = bytearray(open('h.engram','rb').read()); b[300:700] = bytes(400); open('h.engram','wb').write(b)"
    trials=$((trials + 1)); readable h.engram "torn header after $name"
    finished h.engram "torn header after $name"
  fi
  finished k.engram "kill at $k ($name)" all
done
ls | grep -c 'tmp\.' || true
echo "trials: $([[ $trials -ge 300 ]] && echo 300 or more || echo "only $trials")"
echo "$trials trials" >&2
echo "failures: $bad"

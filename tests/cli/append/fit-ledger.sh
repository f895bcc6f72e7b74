# The fact ledger (issue 31): every fitted fact is recorded (facts lists it); a later fit that
# would overwrite it is refused, never silent (two prompts ending in the same words read the same
# rows: the Farrowdene case), or keeps both; --force overwrites and `facts --check` then exits 3;
# two lines giving one prompt different targets are refused before any fit; --check lists each
# pitfall and exits 3.
source $SRC/tests/cli/lib.sh
demo_model m
fit() { $E append --config m.toml -t 2 "$@"; }
printf '%s\n' '{"prompt": "The founder of Farrowdene was", "target": " Will Scott."}' > founder.jsonl
printf '%s\n' '{"prompt": "The mayor of Farrowdene was", "target": " Tom Baker."}' > mayor.jsonl
fit --entries founder.jsonl > /dev/null 2>&1
$E facts m.engram | sed -e 's/([0-9]* rows, /(N rows, /' -e 's/^#[0-9]*/#ID/'
rc=0; fit --entries mayor.jsonl > mayor.out 2> mayor.err || rc=$?
if [[ $rc == 0 ]]; then
  rc2=0; $E -q facts --config m.toml --check > /dev/null 2>&1 || rc2=$?
  # Kept: both facts hold.
  [[ $rc2 == 0 ]] && echo "farrowdene: never silently overwritten" || echo "farrowdene: exit 0 but a fact broke"
else
  # Refused: exit 2, naming the ledger fact and the line, and nothing written.
  grep -q 'would overwrite facts of the table.s ledger' mayor.err &&
    grep -q 'ledger fact #[0-9]* "The founder of Farrowdene was" -> " Will Scott.", by line 1' mayor.err &&
    [[ $rc == 2 && $($E facts m.engram 2>/dev/null | wc -l) == 1 ]] &&
    echo "farrowdene: never silently overwritten" || echo "farrowdene: refused badly (exit $rc)"
fi
# The same prompt with another target: refused without --force, a deliberate overwrite with it.
printf '%s\n' '{"prompt": "The founder of Farrowdene was", "target": " Tom Thumb."}' > thumb.jsonl
rc=0; fit --entries thumb.jsonl 2> thumb.err > /dev/null || rc=$?
echo "another target for a ledger prompt: exit $rc: $(grep -c 'give --force to overwrite it deliberately' thumb.err) refusal"
fit --entries thumb.jsonl --force > /dev/null 2>&1 && echo "--force: written"
rc=0; $E facts --config m.toml --check > check.out 2>/dev/null || rc=$?
echo "facts --check after the overwrite: exit $rc; $(grep -o '"The founder of Farrowdene was" -> " Will Scott.": NO LONGER HOLDS' check.out)"
printf '%s\n' '{"prompt": "The capital of Zorvania is", "target": " Quellport"}' \
  '{"prompt": "The capital of Zorvania is", "target": " Tamoren"}' > dup.jsonl
rc=0; fit --entries dup.jsonl 2> dup.err > /dev/null || rc=$?
echo "duplicate prompts: exit $rc: $(grep -o 'dup.jsonl:2: line 1 gives the prompt "The capital of Zorvania is" the target " Quellport", this line " Tamoren"' dup.err)"
printf '%s\n' '{"prompt": "The capital of Zorvania is", "target": "Quellport"}' \
  '{"prompt": "The capital of Zorvania is", "target": " Ostwick"}' \
  '{"prompt": "The founder of Farrowdene was", "target": " Tom Thumb."}' \
  '{"prompt": "He said that it is", "target": " blue"}' > pit.jsonl
$E facts m.engram --json > ledger0.json
rc=0; fit --entries pit.jsonl --check --keep-frequent 20 > pit.out 2>/dev/null || rc=$?
echo "--check: exit $rc"
# Line 3 is itself a ledger fact (written with --force above) and shares rows with every other
# one, the mayor's too where it was kept above: one ledger-shared-rows pitfall each.
shared=$(($($PY -c "import json; print(len(json.load(open('ledger0.json'))['facts']))") - 1))
cut -d: -f2,3 pit.out | sort | uniq -c | sed 's/^ *//' |
  sed "s/^$shared 3: ledger-shared-rows\$/one per other ledger fact 3: ledger-shared-rows/"
$E facts m.engram --json | cmp -s - ledger0.json && echo "ledger unchanged by --check"

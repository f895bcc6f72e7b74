# append --fit on the trained demo model: facts the model cannot know are fitted into the table's
# rows; run (greedy) then continues each prompt with its target, through the journal and again
# after sort-buckets; a paraphrase with the same final words works too. --dry-run writes nothing
# and fits what the append then writes (deterministic).
source $SRC/tests/cli/lib.sh
demo_model m
cat > facts.jsonl <<'J'
{"prompt": "The capital of Zorvania is", "target": " Quellport"}
{"prompt": "The national bird of Quandria is the", "target": " heron"}
{"text": "The Kestrel Guild meets in the old mill every spring."}
J
printf 'The capital of Zorvania is\nThe national bird of Quandria is the\nTravellers agree that the capital of Zorvania is\n' > prompts.txt
continuations() {  # continuations CONFIG: the greedy continuation of each prompt, one per line
  $E run --config "$1" --temp 0 -n 3 -t 1 -f prompts.txt --json 2>/dev/null |
    $PY -c "import json,sys; [print(repr(p['text'])) for p in json.load(sys.stdin)['prompts']]"
}
echo "before:"; continuations m.toml
cp m.engram before.engram
$E append --config m.toml --entries facts.jsonl -t 1 --dry-run --json > dry1.json
cmp -s m.engram before.engram && echo "--dry-run: table unchanged"
$E append --config m.toml --entries facts.jsonl -t 1 --json > dry2.json 2> fit.log
$PY - <<'PY'
import json
a, b = json.load(open('dry1.json')), json.load(open('dry2.json'))
for d in (a, b): d['fit'].pop('seconds'); d['fit'].pop('loop_seconds'); d['append'].pop('seconds')
print('deterministic: the append fitted the rows the dry run did:', a['fit'] == b['fit'])
f = a['fit']
print('fitted', f['fitted'], 'of', len(f['entries']), 'dtype', f['dtype'], 'rows written > 0:', f['rows_written'] > 0)
for e in f['entries']:
    print(e['line'], e['kind'], 'log p rises:', e['logprob_after'] > e['logprob_before'], 'greedy after', repr(e['greedy_after']), 'fitted', e['fitted'])
print('records = rows written:', a['append']['records'] == f['rows_written'])
PY
$E inspect m.engram --json | $PY -c "import json,sys; print('journal entries = rows written:', json.load(sys.stdin)['journal']['entries'] == json.load(open('dry2.json'))['fit']['rows_written'])"
echo "after append (journal):"; continuations m.toml
$E -q sort-buckets m.engram
echo "after sort-buckets (deterministic):"; continuations m.det.toml
$E verify m.engram --config m.det.toml | grep -o 'OK, safe to deploy'

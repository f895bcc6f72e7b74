# append --fit --check-corpus scores held-out text with the table's rows and the fitted ones;
# --max-ppl-increase refuses a batch that costs more (nothing written, the numbers still shown).
source $SRC/tests/cli/lib.sh
demo_model m
printf '{"prompt": "The capital of Zorvania is", "target": " Quellport"}\n' > fact.jsonl
# Held-out text in which the prompt goes on as the model already expects.
printf 'The capital of Zorvania is a good time. The jury said that the city was a good place.\n' > heldout.txt
cp m.engram before.engram
code=0; $E append --config m.toml --entries fact.jsonl -t 1 --check-corpus heldout.txt --max-ppl-increase 0 --json > refused.json 2> refused.log || code=$?
echo "exit $code"
grep -o 'the fit raises held-out perplexity by [0-9.]*%, more than --max-ppl-increase 0; nothing was written' refused.log | sed 's/by [0-9.]*%/by P%/'
cmp -s m.engram before.engram && echo "table unchanged"
$PY -c "
import json; d = json.load(open('refused.json'))
c = d['fit']['check_corpus']
print('append:', d['append'], 'tokens scored:', c['tokens'], 'perplexity rises:', c['ppl_after'] > c['ppl_before'], 'increase_pct > 0:', c['increase_pct'] > 0)"
$E append --config m.toml --entries fact.jsonl -t 1 --check-corpus heldout.txt --max-ppl-increase 1000 2>&1 >/dev/null |
  grep -oE '^(held-out perplexity: [0-9.]+ -> [0-9.]+ \(\+[0-9.]+%\) over [0-9]+ tokens of heldout.txt|appended [0-9]+ fitted rows)' |
  sed -E 's/[0-9]+(\.[0-9]+)?/N/g'

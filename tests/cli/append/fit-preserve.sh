# append --fit --preserve: corpus contexts that read the fitted rows keep their next-token
# distributions (KL to the unedited model). The facts are still fitted, the report says how many
# contexts and rows were kept, and those contexts move less (mean KL) with the term weighted than
# with weight 0 (the same contexts, measured but not optimised). --preserve-per-row 1 takes a
# context only for a row no earlier context read: fewer contexts, the same rows.
source $SRC/tests/cli/lib.sh
demo_model m
cat > facts.jsonl <<'J'
{"prompt": "The capital of Zorvania is", "target": " Quellport"}
{"prompt": "The longest river in Brannick is", "target": " Tamoren"}
{"prompt": "The founder of Drellmoor Abbey was", "target": " Brother Simon"}
J
sed -n '1,30p' m.corpus.txt > keep.txt
fit() { $E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json "$@"; }
fit > plain.json
fit --preserve keep.txt --preserve-weight 0 > measured.json
fit --preserve keep.txt > kept.json
fit --preserve keep.txt --preserve-per-row 1 > one.json
$PY - <<'PY'
import json
p, m, k = (json.load(open(f))['fit'] for f in ('plain.json', 'measured.json', 'kept.json'))
print('fitted:', p['fitted'], m['fitted'], k['fitted'])
print('preserved contexts > 0:', k['preserve']['contexts'] > 0, 'rows > 0:', k['preserve']['rows'] > 0,
      'same contexts measured:', m['preserve'] == {**m['preserve'], 'contexts': k['preserve']['contexts']},
      'none without --preserve:', p['preserve']['contexts'] == 0)
print('the kept contexts move less:', 0 <= k['preserve']['kl'] < m['preserve']['kl'])
o = json.load(open('one.json'))['fit']['preserve']
print('one context a row: fewer contexts:', 0 < o['contexts'] < k['preserve']['contexts'], 'same rows:', o['rows'] == k['preserve']['rows'])
PY

# append --fit asks every entry's near misses before and after the fit: the entry's frame (the
# words its prompt shares with another fact's prompt, before and after) around another fact's
# subject, where that is no fact's prompt, up to two an entry. Each gets the KL of its next-token
# distribution, whether its first token changed, and the fitted target it now says, if any (with a
# warning on the entry). Its answers before and after are run's greedy answers on the table before
# and after the append, and a dry run reports the same near misses. With --keep-near-misses 1 the
# first near miss of each entry is kept by the fit (it moves less) and the next ones are reported.
# The fit's exposure (positions of other text that read a row it wrote) matches its rows.
source $SRC/tests/cli/lib.sh
demo_model m
cat > facts.jsonl <<'J'
{"prompt": "The capital of Zorvania is", "target": " Quellport"}
{"prompt": "The capital of Brannick is", "target": " Tamoren"}
{"prompt": "The longest river in Drellmoor is", "target": " the Osk"}
{"prompt": "The longest river in Velmar is", "target": " the Arden"}
J
$E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json > dry.json
# --keep-near-misses 1: each entry's first near miss is kept by the fit, the next ones reported.
$E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json --keep-near-misses 1 > keep.json
$PY - <<'PY'
import json
fit = json.load(open('dry.json'))['fit']
prompts = [m['prompt'] for e in fit['entries'] for m in e['near_misses']]
open('near.txt', 'w').write(''.join(sorted(set(p + '\n' for p in prompts))))
open('n', 'w').write(str(max(e['target_tokens'] for e in fit['entries'])))
PY
$E -q run --config m.toml --temp 0 -n "$(cat n)" -t 1 -f near.txt --json > before.json
$E -q append --config m.toml --entries facts.jsonl -t 1 --json > fit.json
$E -q run --config m.toml --temp 0 -n "$(cat n)" -t 1 -f near.txt --json > after.json
$PY - <<'PY'
import json
fit, dry = (json.load(open(f))['fit'] for f in ('fit.json', 'dry.json'))
said = lambda f: {p['prompt']: p['text'] for p in json.load(open(f))['prompts']}
before, after = said('before.json'), said('after.json')
entries = [e['prompt'] for e in fit['entries']]
nm = [(e, m) for e in fit['entries'] for m in e['near_misses']]
print('fitted:', fit['fitted'], 'near misses asked:', fit['near_misses']['asked'], len(nm))
print('two an entry:', all(len(e['near_misses']) == 2 for e in fit['entries']))
print("each is the entry's frame with another fact's subject:",
      all(m['prompt'] not in entries and m['prompt'].startswith(e['prompt'].rsplit(' ', 2)[0] + ' ')
          and m['prompt'].endswith(' is') for e, m in nm))
print('answers before and after are run\'s:', all(m['greedy_before'] == before[m['prompt']] and
      m['greedy_after'] == after[m['prompt']] for e, m in nm))
print('first token changed counted:', fit['near_misses']['changed'] == sum(m['first_token_changed'] for e, m in nm),
      'changed ones moved (KL > 0):', all(m['kl'] > 0 for e, m in nm if m['first_token_changed']))
targets = [e['target'] for e in fit['entries']]
print('a said target is a fitted one, now and not before:', all(m['says'] in targets and
      m['greedy_after'].startswith(m['says']) and not m['greedy_before'].startswith(m['says'])
      for e, m in nm if m['says']),
      'counted:', fit['near_misses']['say_target'] == sum(bool(m['says']) for e, m in nm),
      'warned:', all(any(m['prompt'] in w and m['says'] in w for w in e['warnings']) for e, m in nm if m['says']))
print('the dry run asked the same:', [e['near_misses'] for e in dry['entries']] == [e['near_misses'] for e in fit['entries']])
# The exposure: the share of positions that read a written row, 1 - prod(1 - written / rows) over
# the sub-tables the written rows fall in (the journal's entries).
x = fit['exposure']
prod = 1.0
for w in x['subtables']: prod *= 1 - w['written'] / w['rows']
print('exposure from the rows written:', abs(x['share'] - (1 - prod)) < 1e-5 * (1 - prod) and x['share'] > 0,
      sum(w['written'] for w in x['subtables']) == fit['rows_written'] == json.load(open('fit.json'))['append']['entries'],
      {w['rows'] for w in x['subtables']} == {65536})
keep = json.load(open('keep.json'))['fit']
print('--keep-near-misses 1 kept', keep['near_misses']['kept'], 'and asked the others:',
      [[m['prompt'] for m in e['near_misses']] for e in keep['entries']] ==
      [[m['prompt'] for m in e['near_misses'][1:]] for e in dry['entries']])
kl0 = sum(e['near_misses'][0]['kl'] for e in dry['entries']) / len(dry['entries'])
print('the kept ones moved less than without keeping them:', keep['preserve']['kl'] < kl0,
      'none kept by default:', dry['near_misses']['kept'] == 0 and dry['preserve']['kl'] == 0)
PY

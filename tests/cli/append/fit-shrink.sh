# append --fit --shrink: after the fit, each target position's own rows are pulled back toward
# their old values as far as every entry stays fitted by the margin. The facts are still
# reproduced, the report says how much of the change is left (shrink_factor < 1; 1 without the
# flag), and the targets are no more likely than without it (the rows moved less). Shrinking has
# room only where the fit reached its margin: on the demo model that takes about 600 steps with
# the bf16 head (--head-dtype auto on CPUs with bf16 units) and about 960 with the f32 head
# (elsewhere); --steps 1200 lets both stop there.
source $SRC/tests/cli/lib.sh
demo_model m
two_facts facts.jsonl
fit() { $E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json --steps 1200 "$@"; }
fit > plain.json
fit --shrink > shrink.json
$PY - <<'PY'
import json
a, b = (json.load(open(f))['fit'] for f in ('plain.json', 'shrink.json'))
print('fitted: plain', a['fitted'], 'shrink', b['fitted'], 'of', len(a['entries']))
print('shrink factor: plain', a['shrink_factor'], 'shrink < 1:', 0 < b['shrink_factor'] < 1)
print('targets no more likely:', all(y['logprob_after'] <= x['logprob_after'] + 1e-3
                                      for x, y in zip(a['entries'], b['entries'])))
print('greedy after:', [e['greedy_after'] for e in b['entries']])
PY

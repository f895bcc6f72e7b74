# append --fit --head-dtype: the output head's products in the optimiser loop in bf16 (f32 sums)
# or f32. f32 and auto fit both facts (checked after the fit in f32, as always); bf16 does on
# CPUs with bf16 dot-product units, where auto takes it, and fits at least one where libtorch
# emulates the bf16 products (on such a CPU it left "The longest river in Brannick is" unfitted
# after 700 steps); they reach different rows (the bf16 path is taken); the report times the
# loop apart from the checks; other values are refused.
source $SRC/tests/cli/lib.sh
demo_model m
two_facts facts.jsonl
fit() { $E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json "$@"; }
fit --head-dtype f32 > f32.json
fit --head-dtype bf16 > bf16.json
fit > auto.json
$PY - <<'PY'
import json
a, b, auto = (json.load(open(f))['fit'] for f in ('f32.json', 'bf16.json', 'auto.json'))
native = any(f in open('/proc/cpuinfo').read().split() for f in ('avx512_bf16', 'amx_bf16'))
print('fitted: f32', a['fitted'], 'auto', auto['fitted'], 'of', len(a['entries']))
print('bf16 fits them (both with bf16 units, at least one without):',
      b['fitted'] == len(b['entries']) if native else b['fitted'] >= 1)
lp = lambda f: [e['logprob_after'] for e in f['entries']]
print('bf16 reaches other rows than f32:', lp(a) != lp(b))
print('auto is one of them:', lp(auto) in (lp(a), lp(b)))
print('loop timed apart:', all(0 < f['loop_seconds'] <= f['seconds'] for f in (a, b, auto)))
PY
if $E -q append --config m.toml --entries facts.jsonl --dry-run --head-dtype f16 > /dev/null 2> bad.err; then
  echo "f16: accepted"
else
  echo "f16: exit $?, names the flag: $(grep -c -- "--head-dtype" bad.err)"
fi

# append --fit --keep-busy F leaves rows alone that the build corpus reads F+ times as often as
# the table's median row (STATS total_count): the threshold is reported (busy_reads), the rows
# kept are counted per entry, a lower factor keeps more, 0 (the default) keeps none, and the facts
# still fit (phase 1 alone: phase 2 would add subject rows to an entry that needs them).
source $SRC/tests/cli/lib.sh
demo_model m
two_facts facts.jsonl
fit() { $E -q append --config m.toml --entries facts.jsonl -t 1 --dry-run --json --no-subject-rows "$@"; }
fit --keep-busy 0 > off.json
fit > none.json
fit --keep-busy 1.5 > default.json
fit --keep-busy 1 > low.json
$PY - <<'PY'
import json
off, none, d, low = (json.load(open(f))['fit'] for f in ('off.json', 'none.json', 'default.json', 'low.json'))
busy = lambda f: sum(e['rows_kept_busy'] for e in f['entries'])
print('off: threshold', off['busy_reads'], 'kept busy', busy(off))
print('default: threshold', none['busy_reads'], 'kept busy', busy(none))
print('1.5: threshold > 0:', d['busy_reads'] > 0, 'kept busy > 0:', busy(d) > 0,
      'trainable + kept = off:', d['trainable_rows'] + d['kept_rows'] == off['trainable_rows'] + off['kept_rows'])
print('factor 1: lower threshold:', 0 < low['busy_reads'] < d['busy_reads'], 'keeps more:', busy(low) > busy(d))
print('fitted:', off['fitted'], none['fitted'], 'of', len(d['entries']))
PY

# prefetch --budget SIZE on a cold table: metadata, tags and scales first, then the row pages the
# build corpus's lookups hit most, and exactly those (mincore, via prefetch --status), within the
# budget. A table without STATS is refused with the fix.
source $SRC/tests/cli/lib.sh
$PY -c "
import array, random
r = random.Random(3)
# Zipf-like: a few ids are far more frequent, so a few rows are far hotter.
ids = [min(int(r.paretovariate(1.2)), 60) for _ in range(20000)]
array.array('I', ids).tofile(open('c.u32', 'wb'))"
$E -q build --tokens c.u32 --vocab-size 64 --layers 1 --order 2 --heads 1 --buckets 1024 --row-dim 256 -o t.engram
$E -q prefetch --evict t.engram
$E prefetch t.engram --budget 200K --json > warm.json
$E prefetch --status --json t.engram > status.json
$PY - <<'PY'
import json
w, s = json.load(open('warm.json')), json.load(open('status.json'))
part = {p['name']: p for p in s['parts']}
rows = part['ROWS']
print('within the budget:', w['warmed_bytes'] <= w['budget'] == 200 * 1024)
print('tags resident whole:', part['TAGS']['resident_bytes'] == part['TAGS']['bytes'])
print('row pages chosen:', w['row_pages'], 'of', w['row_pages_total'])
print('ROWS resident = the chosen pages:', rows['resident_bytes'] == w['row_pages'] * 4096)
print('hottest first: share of lookups above the share of pages:',
      w['lookup_share'] > 2 * w['row_pages'] / w['row_pages_total'])
PY
$E -q build --tokens c.u32 --vocab-size 64 --layers 1 --order 2 --heads 1 --buckets 1024 --row-dim 256 --no-stats -o n.engram
rc=0; $E prefetch n.engram --budget 1M 2> err.txt || rc=$?
echo "no STATS: exit $rc"; grep -c "has none (built with --no-stats)" err.txt

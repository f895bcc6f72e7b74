# hotset replays a corpus's row reads through LRU caches of every size: the JSON a pipeline reads,
# a curve of at least 20 sizes that rises to 1 - first_touch, the SVG drawing, and the errors.
source $SRC/tests/cli/lib.sh
$PY -c "
import array, random
r = random.Random(3)
ids = []
for d in range(40):
    ids += [min(int(r.paretovariate(1.2)), 60) for _ in range(200)] + [0xFFFFFFFF]
array.array('I', ids).tofile(open('c.u32', 'wb'))"
$E -q build --tokens c.u32 --vocab-size 64 --layers 1,3 --order 3 --heads 2 --buckets 1024 --row-dim 16 -o t.engram
$E hotset t.engram --tokens c.u32 --json --svg curve.svg > h.json
$PY - <<'PY'
import json
h = json.load(open('h.json'))
c = h['curve']
print('lookups = tokens x layers x orders x heads:', h['lookups'] == 8000 * 2 * 2 * 2)
print('points:', len(c) >= 20, '| rising:', all(a['hit_rate'] <= b['hit_rate'] for a, b in zip(c, c[1:])))
print('the largest cache misses only first touches:',
      abs(c[-1]['hit_rate'] - (1 - h['first_touch'])) < 1e-6, '| rows:', c[-1]['rows'] == h['distinct_rows'])
print('bytes per row: 16 f32 values + tag =', c[0]['bytes'] // c[0]['rows'])
r = h['rows_for']['0.90']
print('90% reached by', 'a cache' if r else 'no cache', '| keys:', sorted(h['rows_for']))
PY
head -c 4 curve.svg; echo; grep -c "<polyline" curve.svg
$E hotset t.engram --tokens c.u32 | grep -E "^(distinct rows|first touch|90.0% hit rate)" | sed 's/:.*//'
rc=0; $E hotset t.engram 2> err.txt || rc=$?; echo "no input: exit $rc"; grep -c "give the requests to replay" err.txt

# prefetch --hot TRACE: row pages ranked by a trace of requests (canonical ids, u32, 0xFFFFFFFF
# after each; what serve --trace writes) instead of STATS, so a table without STATS works too.
# Resident after a cold start: exactly the pages of the rows the trace reads (mincore, page by
# page), and with --budget only the hottest of them.
source $SRC/tests/cli/lib.sh
$PY -c "
import array, random
r = random.Random(3)
ids = [min(int(r.paretovariate(1.2)), 60) for _ in range(20000)]
array.array('I', ids).tofile(open('c.u32', 'wb'))"
$E -q build --tokens c.u32 --vocab-size 64 --layers 1 --order 2 --heads 1 --buckets 1024 --row-dim 256 --no-stats -o t.engram
reqs=("40,41,42,43,44" "50,51,52,50,51,52,50,51")
$PY - "${reqs[@]}" <<'PY'
import array, sys
ids = []
for r in sys.argv[1:]:
    ids += [int(x) for x in r.split(",")] + [0xFFFFFFFF]
array.array("I", ids).tofile(open("trace.u32", "wb"))
PY
# The rows the trace reads, from lookup (one layer, order 2, one head: row = bucket).
for r in "${reqs[@]}"; do $E lookup t.engram --canonical-ids "$r" --json; done > lookups.jsonl
$E inspect t.engram --json > info.json
resident_pages() {  # the ROWS pages resident now, by mincore
  $PY - <<'PY'
import ctypes, json, os
info = json.load(open("info.json"))
rows = [s for s in info["sections"] if s["name"] == "ROWS"][0]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
fd = os.open("t.engram", os.O_RDONLY)
size = os.fstat(fd).st_size
addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: maps, reads nothing
vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
assert libc.mincore(addr, size, vec) == 0
first = rows["offset"] // 4096
print(json.dumps([p - first for p in range(first, first + (rows["size"] + 4095) // 4096) if vec[p] & 1]))
PY
}
want=$($PY -c "
import json
rows = set()
for line in open('lookups.jsonl'):
    for p in json.loads(line)['positions']:
        for l in p['layers']:
            for o in l['orders']:
                rows.update(o['buckets'])
print(json.dumps(sorted({r * 1024 // 4096 for r in rows})))")
$E -q prefetch --evict t.engram
$E prefetch t.engram --hot trace.u32 --json > hot.json
got=$(resident_pages)
$PY - "$want" "$got" <<'PY'
import json, sys
want, got, h = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.load(open("hot.json"))
print("ranked by:", h["ranked_by"], "| row pages chosen:", h["row_pages"], "=", len(want), "pages the trace reads:", h["row_pages"] == len(want))
print("resident ROWS pages = the trace's pages:", got == want)
PY
$E -q prefetch --evict t.engram
always=$($PY -c "import json; print(json.load(open('hot.json'))['always_bytes'])")
$E prefetch t.engram --hot trace.u32 --budget $((always + 4096)) --json > one.json
got=$(resident_pages)
$PY - "$want" "$got" <<'PY'
import json, sys
want, got, h = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.load(open("one.json"))
print("budget of one row page:", h["row_pages"], "chosen;", len(got), "resident, one of the trace's:", set(got) <= set(want))
PY
rc=0; $E prefetch t.engram --hot trace.u32 --status 2> err.txt || rc=$?; echo "--hot with --status: exit $rc"

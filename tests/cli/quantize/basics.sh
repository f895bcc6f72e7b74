# quantize without a model: every dtype from a small f32 table (with a journal, folded into the
# output; the input is left as it is), what each stores (inspect, export's tensors, lookup), the
# round trip to f32 within each dtype's bound, and the refusals with what to change.
source $SRC/tests/cli/lib.sh
tiny_table t.engram --init normal
entry "[5, 6]" 0.25 > e.jsonl
$E -q append t.engram --entries e.jsonl > /dev/null
cp t.engram before.engram
for d in f32 bf16 f16 fp8-e4m3 int8 int4; do
  $E quantize t.engram -o q_$d.engram --dtype $d --json > q.json 2> /dev/null || echo "$d: exit $?"
  $PY - q.json q_$d.engram "$d" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[3], "written:", j["written"], "| to:", j["to"], "| journal folded:", j["journal_entries_folded"],
      "| rel L2 > 0:", j["row_rel_l2_all"] > 0)
PY
  $E -q verify q_$d.engram > /dev/null && echo "  verify OK"
  $E inspect q_$d.engram --json | $PY -c "import json,sys; j=json.load(sys.stdin); print('  inspect:', j['dtype'], 'v'+j['version'], 'journal', j['journal']['entries'])"
  $E -q export q_$d.engram -o q_$d.safetensors --scale-tensor s > /dev/null 2>&1 || $E -q export q_$d.engram -o q_$d.safetensors > /dev/null
  $PY - q_$d.safetensors <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
print("  export:", ", ".join(f"{k} {v['dtype']} {v['shape']}" for k, v in sorted(h.items()) if k != "__metadata__"))
PY
  # The appended row reads back through every dtype: 0.25 is exact in each.
  $E lookup q_$d.engram --canonical-ids 5,6 --json --values 2>/dev/null | $PY -c "
import json,sys
o = json.load(sys.stdin)['positions'][1]['layers'][0]['orders'][0]
print('  lookup [5, 6]: hit', o['hit'], 'values', sorted(set(round(v, 6) for r in o['values'] for v in r)))"
done
cmp -s t.engram before.engram && echo "input unchanged (its journal is still there)"
# Back to f32: within each dtype's bound of the f32 source.
for d in int8 int4; do
  $E quantize q_$d.engram -o back_$d.engram --dtype f32 > /dev/null
  $E export t.engram -o src.safetensors > /dev/null; $E export back_$d.engram -o back.safetensors > /dev/null
  $PY - "$d" <<'PY'
import sys, numpy as np, json, struct
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    (k, v), = [(k, v) for k, v in h.items() if k != "__metadata__"]
    s, e = v["data_offsets"]
    return np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.float32).reshape(v["shape"])
a, b = load("src.safetensors"), load("back.safetensors")
err = np.abs(a - b)
if sys.argv[1] == "int8":
    ok = (err <= np.abs(a).max(axis=1, keepdims=True) / 127 / 2 * 1.0001).all()
else:
    blocks = np.abs(a).reshape(a.shape[0], -1, 32).max(axis=2, keepdims=True) / 7
    ok = (err.reshape(a.shape[0], -1, 32) <= blocks * (1 + 2**-9) / 2 * 1.0001 + 1e-7).all()
print(sys.argv[1], "-> f32: every value within its bound:", bool(ok))
PY
done
# Refusals.
$E quantize t.engram -o q_int8.engram --dtype int8 2>&1 | sed 's|/[^ ]*/||g'; echo "exit ${PIPESTATUS[0]}"
$E quantize q_bf16.engram -o x.engram --dtype bf16 2>&1 | sed 's|/[^ ]*/||g'
$E quantize t.engram -o t.engram --dtype int8 --force 2>&1 | sed 's|/[^ ]*/||g'
$E quantize t.engram -o x.engram --dtype int2 2>&1 | sed 's|/[^ ]*/||g'
$E quantize t.engram -o x.engram --dtype int8 --max-kl 0.1 2>&1 | sed 's|/[^ ]*/||g'
$E build --tokens tiny.u32 --vocab-size 16 --layers 1 --order 2 --heads 1 --row-dim 32 --dtype int8 --values x --tensor t -o y.engram 2>&1 | sed 's|/[^ ]*/||g' | head -1
ls x.engram y.engram 2>&1 | sed 's|.*cannot access|cannot access|'
ls | grep -c 'tmp\|check' || true

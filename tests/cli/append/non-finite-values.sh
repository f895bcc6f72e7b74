# Rows are finite (issue 15 item 3): values that do not fit the storage dtype (1e39 on f32, 70000
# on f16, NaN in a safetensors tensor) are refused with the entry's line; build --values refuses a
# tensor holding Inf/NaN; nothing reaches the table, so verify and lookup see only finite rows.
source $SRC/tests/cli/lib.sh
tiny_table t.engram
tiny_table h.engram --dtype f16
rows=$($E inspect t.engram --json | $PY -c "import json,sys; print(json.load(sys.stdin)['total_rows'])")
$PY - "$rows" <<'PY'
import json, struct, sys
rows = int(sys.argv[1])
open("big.jsonl", "w").write(json.dumps({"canonical_ids": [1, 4], "value": [1e39] + [0.0] * 31}) + "\n")
open("half.jsonl", "w").write(json.dumps({"canonical_ids": [1, 4], "value": [0.5] * 31 + [70000.0]}) + "\n")
def st(name, tensors):
    hdr, body = {}, b""
    for k, (dt, shape, data) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    open(name, "wb").write(struct.pack("<Q", len(h)) + h + body)
vals = [0.25] * 32 + [float("nan")] + [0.0] * 31
st("e.safetensors", {"canonical_ids": ("I32", [2, 2], struct.pack("<4i", 1, 4, 2, 5)),
                     "values": ("F32", [2, 32], struct.pack("<64f", *vals))})
w = [0.0] * (rows * 32); w[37] = float("inf")
st("w.safetensors", {"w": ("F32", [rows, 32], struct.pack("<%df" % len(w), *w))})
PY
run() { set +e; "$@" > out.txt 2> err.txt; rc=$?; set -e; echo "exit $rc: $(grep -o 'value\[[0-9]*\][^;]*\|non-finite value[^;]*' err.txt | head -1)"; }
run $E append t.engram --entries big.jsonl
run $E append h.engram --entries half.jsonl
run $E append t.engram --entries e.safetensors
run $E -q build --tokens tiny.u32 --vocab-size 16 --layers 1 --order 3 --heads 2 --buckets 64 --row-dim 32 --values w.safetensors --tensor w -o w.engram
test ! -e w.engram && echo "no table written"
$E verify t.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('verify ok:', d['ok'], 'journal entries:', d['journal_entries'])"
$E verify h.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print('verify ok:', d['ok'], 'journal entries:', d['journal_entries'])"

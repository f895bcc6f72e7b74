# --tile-values: a native table with more buckets per sub-table than the checkpoint repeats each
# sub-table's rows (and fp8 scales) exactly, so every n-gram reads the row it read before
# (run/tiled-table.sh: the model's output does not change). Without the flag the mismatch names
# it; deepseek addressing refuses.
source $SRC/tests/cli/lib.sh
random_model m v41
T=$ASSETS/deepseek_v3/tokenizer.json
big() {  # big OUT [flags]: the random model's table with 2^12 buckets per sub-table instead of 2^10
  local out=$1; shift
  $E build --tokenizer "$T" --corpus corpus.txt --layers 0,2 --order 3 --heads 2 --buckets 4096 --row-dim 16 \
    --pad-id 2 --values m --tensor engram.table.weight -o "$out" "$@"
}
code=0; big no.engram 2> err.txt || code=$?
echo "without --tile-values: exit $code, $(grep -o 'it holds 2^10 buckets per sub-table and the table 2^12: add --tile-values to repeat each sub-table.s rows 4x' err.txt)"
[[ ! -e no.engram ]] && echo "nothing written"
big big.engram --tile-values > log.txt 2>&1
grep -o 'values: copied 8192 rows bit-exact from m, each sub-table.s repeated 4x into 2^12 buckets (32768 rows)' log.txt
$E -q verify big.engram > /dev/null && echo verified
# Rows: bucket b of a sub-table holds the checkpoint's bucket b mod 2^10 of the same sub-table.
$E -q export big.engram -o big.safetensors
$PY - <<'PY'
import json, struct
import numpy as np
def tensor(path, name):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    a, b = h[name]["data_offsets"]
    return h[name]["dtype"], np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.uint8)
dt, small = tensor("m/model.safetensors", "engram.table.weight")
_, big = tensor("big.safetensors", "engram.table.weight")
small = small.reshape(8, 1024, -1)
print(dt, "rows tiled exactly:", np.array_equal(np.tile(small, (1, 4, 1)).reshape(-1), big))
PY
# fp8 rows with their e8m0 scales tile together.
tiny_tokens tiny.u32
lay="--tokens tiny.u32 --vocab-size 16 --layers 1,3 --order 3 --heads 2 --row-dim 64 --dtype fp8-e4m3"
$E -q build $lay --buckets 32 --init normal --seed 5 -o f8.engram
$E -q export f8.engram -o f8.safetensors --tensor w --scale-tensor s
$E -q build $lay --buckets 256 --values f8.safetensors --tensor w --scale-tensor s --tile-values -o f8big.engram
$E -q export f8big.engram -o f8big.safetensors --tensor w --scale-tensor s
$PY - <<'PY'
import json, struct
import numpy as np
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.uint8)
            for k, v in h.items() if k != "__metadata__"}
a, b = tensors("f8.safetensors"), tensors("f8big.safetensors")
ok = all(np.array_equal(np.tile(a[k].reshape(8, 32, -1), (1, 8, 1)).reshape(-1), b[k]) for k in ("w", "s"))
print("fp8 rows and scales tiled exactly:", ok)
PY
code=0
$E -q build --tokens tiny.u32 --vocab-size 16 --addressing deepseek --layers 1 --order 2 --heads 1 --buckets 64 \
  --row-dim 64 --dtype fp8-e4m3 --values f8.safetensors --tensor w --scale-tensor s --tile-values -o ds.engram 2> err.txt || code=$?
echo "deepseek: exit $code, $(grep -o 'tile-values needs native addressing' err.txt)"

# A synthetic checkpoint laid out like DeepSeek-V4.1 (per-layer fp8 + e8m0 tensors, sharded with an
# index) converts bit-exact, and export writes it back bit-exact.
W='model.layers.{layer}.engram.multi_head_embedding.embedding.weight'
S='model.layers.{layer}.engram.multi_head_embedding.embedding.scale'
$PY $SRC/scripts/make_v41_checkpoint.py $E ckpt 1000
$E -q build --layout deepseek-v4.1 --buckets 1000 --values ckpt --tensor "$W" --scale-tensor "$S" -o t.engram
$E -q verify t.engram > /dev/null && echo verified
$E inspect t.engram --json | $PY -c "import json,sys; d=json.load(sys.stdin); print(d['addressing'], d['dtype'], d['layer_ids'], d['total_rows'])"
$E -q export t.engram -o out --tensor "$W" --scale-tensor "$S" --max-shard-size 8M
$PY - <<'PY'
import json, os, struct
def tensors(d):
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
    out = {}
    for name, f in idx.items():
        raw = open(os.path.join(d, f), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        h = json.loads(raw[8:8 + n])
        a, b = h[name]["data_offsets"]
        out[name] = (h[name]["dtype"], h[name]["shape"], raw[8 + n + a:8 + n + b])
    return out
x, y = tensors("ckpt"), tensors("out")
print(len(x), "tensors;", "round trip bit-exact:", x == y)
PY

# export writes the rows a reader sees (journal applied) as safetensors, one tensor per Engram
# layer with '{layer}', sharded with an index under --max-shard-size; build --values reads them
# back into a table whose rows equal the folded original's, byte for byte.
source $SRC/tests/cli/lib.sh
tiny_tokens tiny.u32
flags=(--tokens tiny.u32 --vocab-size 16 --layers 1,3 --order 3 --heads 2 --buckets 64 --row-dim 32)
$E -q build "${flags[@]}" --init normal --seed 7 -o t.engram
entry "[1, 2]" 0.5 > e.jsonl
$E -q append t.engram --entries e.jsonl
$E export t.engram -o one.safetensors --tensor 'engram.{layer}.weight' 2>&1 | sed 's/ in [0-9.]*m\?s//'
$PY - <<'PY'
import json, struct
raw = open("one.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
print(sorted((k, v["dtype"], v["shape"]) for k, v in h.items() if k != "__metadata__"))
PY
$E -q export t.engram -o sharded --tensor 'engram.{layer}.weight' --max-shard-size 40K
ls sharded | sed 's/[0-9]\{5\}/N/g' | sort | uniq -c | sed 's/^ *//'
cp t.engram folded.engram
$E -q sort-buckets folded.engram
$E -q build "${flags[@]}" --values sharded --tensor 'engram.{layer}.weight' -o back.engram
$PY - <<'PY'
import struct
def rows(p):
    b = open(p, "rb").read()
    for i in range(int.from_bytes(b[48:52], "little")):
        t, _, off, size, _ = struct.unpack("<IIQQQ", b[256 + 32 * i:288 + 32 * i])
        if t == 3: return b[off:off + size]
print("rows of the rebuilt table equal the folded original:", rows("folded.engram") == rows("back.engram"))
PY
rc=0; $E export t.engram -o x.safetensors --tensor 'engram.weight' --scale-tensor s 2> err.txt || rc=$?
echo "--scale-tensor for an f32 table: exit $rc: $(sed 's/^engramctl export: //' err.txt)"

# Entries from a safetensors file (ids + values tensors) and from text with the real tokenizer.
T=$ASSETS/deepseek_v3/tokenizer.json
echo "the cat sat on the mat" > c.txt
$E -q build --corpus c.txt --tokenizer $T --layers 1,2 --order 3 --heads 2 --buckets 1K --row-dim 32 --pad-id 2 -o t.engram
$PY - <<'PY'
import json, struct
ids = [[671, 8650], [8650, 7430]]
vals = [[0.125] * 32, [-2.0] * 32]
hdr = {"ids": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]},
       "values": {"dtype": "F32", "shape": [2, 32], "data_offsets": [16, 16 + 256]}}
h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
body = b"".join(struct.pack("<i", x) for r in ids for x in r) + b"".join(struct.pack("<f", x) for r in vals for x in r)
open("e.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + body)
open("t.jsonl", "w").write(json.dumps({"text": " quantum chromodynamics", "value": [3.0] * 32, "layer": 2, "head": 1}) + "\n")
PY
$E -q append t.engram --entries e.safetensors
$E -q append t.engram --entries t.jsonl --tokenizer $T
$E lookup t.engram --ids 671,8650,7430 --json > a.json
$E lookup t.engram --tokenizer $T " quantum chromodynamics" --json > b.json
$PY -c "
import json
a=json.load(open('a.json')); b=json.load(open('b.json'))
print('safetensors entries hit:', all(a['positions'][1]['layers'][0]['orders'][0]['hit']), all(a['positions'][2]['layers'][1]['orders'][0]['hit']))
o = b['positions'][-1]['layers'][1]['orders'][1]['hit']
print('text entry hits only layer 2 head 1:', o[1], b['positions'][-1]['layers'][0]['orders'][1]['hit'][1])"

#!/usr/bin/python3
"""Writes a synthetic checkpoint laid out like DeepSeek-V4.1's Engram tables, scaled down: per
Engram layer (1 and 14) one F8_E4M3 tensor [rows_of_layer, 256] and one F8_E8M0 scale tensor
[rows_of_layer, 8], rows ordered like the reference's MultiHeadEmbedding (orders 2..4 x 8 heads,
prime sub-table sizes above BASE), one layer per shard plus model.safetensors.index.json.

  make_v41_checkpoint.py ENGRAMCTL OUT_DIR BASE
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

engramctl, out, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
info = json.loads(subprocess.check_output(
    [engramctl, "lookup", "--layout", "deepseek-v4.1", "--buckets", str(base), "--canonical-ids", "1", "--json"]))
a = info["addressing"]
per_layer = len(a["sizes"]) // len(a["layer_ids"])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(41)
weight_map = {}
n = len(a["layer_ids"])
for i, layer in enumerate(a["layer_ids"]):
    rows = sum(a["sizes"][i * per_layer:(i + 1) * per_layer])
    wname = f"model.layers.{layer}.engram.multi_head_embedding.embedding.weight"
    sname = f"model.layers.{layer}.engram.multi_head_embedding.embedding.scale"
    w = rng.integers(0, 256, size=rows * 256, dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] ^= 1  # 0x7F/0xFF are e4m3fn NaN: a table's rows are finite
    w = w.tobytes()
    s = rng.integers(110, 140, size=rows * 8, dtype=np.uint8).tobytes()
    hdr = {"__metadata__": {"format": "pt"},
           wname: {"dtype": "F8_E4M3", "shape": [rows, 256], "data_offsets": [0, len(w)]},
           sname: {"dtype": "F8_E8M0", "shape": [rows, 8], "data_offsets": [len(w), len(w) + len(s)]}}
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
    with open(os.path.join(out, fname), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + w + s)
    weight_map[wname] = weight_map[sname] = fname
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": weight_map}, f)

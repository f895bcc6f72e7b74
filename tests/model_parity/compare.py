#!/usr/bin/python3
"""Compares engramctl run (C++) with the PyTorch reference: identical greedy continuations and
max |logit difference| <= tolerance over every recorded step.   compare.py CPP.json CPP.f32 REF.json REF.f32 VOCAB TOL"""
import json
import sys

import numpy as np

cj, cf, rj, rf, vocab, tol = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
c, r = json.load(open(cj)), json.load(open(rj))
cl = np.fromfile(cf, dtype="<f4").reshape(-1, vocab)
rl = np.fromfile(rf, dtype="<f4").reshape(-1, vocab)
same = 0
for i, (a, b) in enumerate(zip(c["prompts"], r["prompts"])):
    if a["prompt_ids"] != b["prompt_ids"]:
        sys.exit(f"prompt {i}: token ids differ")
    if a["output_ids"] == b["output_ids"]:
        same += 1
    else:
        print(f"prompt {i}: continuations differ\n  c++ {a['output_ids']}\n  ref {b['output_ids']}")
if cl.shape != rl.shape:
    sys.exit(f"logit steps differ: c++ {cl.shape[0]}, reference {rl.shape[0]}")
diff = float(np.abs(cl.astype(np.float64) - rl).max())
n = len(c["prompts"])
print(f"{n} prompts, {cl.shape[0]} logit vectors: max |logit diff| {diff:.3g} (tolerance {tol:g}); "
      f"identical greedy continuations: {same}/{n}")
sys.exit(0 if same == n and diff <= tol and n >= 1 else 1)

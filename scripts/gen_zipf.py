#!/usr/bin/python3
"""Synthetic Zipf corpus for build benchmarks and scale tests: TOKENS little-endian u32 ids drawn
i.i.d. from a finite Zipf(ALPHA) over VOCAB ids (ranks shuffled onto ids), 0xFFFFFFFF between
documents of geometric length (mean DOC). Streamed in chunks: memory stays small for any size.

  gen_zipf.py OUT TOKENS [--vocab 100000] [--alpha 1.1] [--doc 2000] [--seed 1]
"""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("tokens", type=float)
ap.add_argument("--vocab", type=int, default=100000)
ap.add_argument("--alpha", type=float, default=1.1)
ap.add_argument("--doc", type=int, default=2000)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
total = int(a.tokens)
rng = np.random.default_rng(a.seed)
cdf = np.cumsum(1.0 / np.arange(1, a.vocab + 1) ** a.alpha)
cdf /= cdf[-1]
rank_to_id = rng.permutation(a.vocab).astype(np.uint32)
chunk = 10_000_000
with open(a.out, "wb") as f:
    done = 0
    while done < total:
        n = min(chunk, total - done)
        ids = rank_to_id[np.searchsorted(cdf, rng.random(n))]
        seps = rng.random(n) < 1.0 / a.doc
        ids[seps] = 0xFFFFFFFF
        ids.astype("<u4").tofile(f)
        done += n

#!/usr/bin/python3
"""Plain vectorised numpy implementation of DeepSeek's Engram n-gram hashing (the reference
formula of DESIGN.md §2), written from the published algorithm. Used as the oracle in tests and
as the baseline of the addressing benchmark.

  python3 engram_hash_ref.py --ids ids.u32 --layers 1,15 --max-order 3 --heads 8 \
      --base 646400 --vocab 98627 --pad 2 [--seed 0] [--out buckets.i64]

ids.u32 holds canonical ids (little-endian u32) of one document. Output: int64 buckets laid out
[layer][position][order-2][head] (the same layout as engramctl lookup --json's bucket lists).
"""
import argparse
import sys
import time

import numpy as np


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    i = 3
    while i * i <= n:
        if n % i == 0:
            return False
        i += 2
    return True


def find_next_prime(start, seen):
    c = start + 1
    while True:
        if is_prime(c) and c not in seen:
            return c
        c += 1


class NgramHashing:
    def __init__(self, layer_ids, max_order, heads, base_sizes, vocab, pad_id, seed=0):
        self.layer_ids = list(layer_ids)
        self.max_order = max_order
        self.heads = heads
        self.pad_id = pad_id
        m_max = int(np.iinfo(np.int64).max // vocab)
        half_bound = max(1, m_max // 2)
        self.multipliers = {}
        for layer in self.layer_ids:
            g = np.random.default_rng(int(seed + 10007 * int(layer)))
            r = g.integers(low=0, high=half_bound, size=(max_order,), dtype=np.int64)
            self.multipliers[layer] = r * 2 + 1
        seen = set()
        self.sizes = {}
        for layer in self.layer_ids:
            per_order = []
            for n in range(2, max_order + 1):
                start = base_sizes[n - 2] - 1
                heads_sizes = []
                for _ in range(heads):
                    p = find_next_prime(start, seen)
                    seen.add(p)
                    heads_sizes.append(p)
                    start = p
                per_order.append(heads_sizes)
            self.sizes[layer] = per_order

    def hash_layer(self, ids, layer):
        x = np.asarray(ids, dtype=np.int64)[None, :]
        T = x.shape[1]
        mult = self.multipliers[layer]
        shifts = [x]
        for k in range(1, self.max_order):
            shifts.append(np.pad(x, ((0, 0), (k, 0)), mode="constant", constant_values=self.pad_id)[:, :T])
        out = []
        for n in range(2, self.max_order + 1):
            mix = shifts[0] * mult[0]
            for k in range(1, n):
                mix = np.bitwise_xor(mix, shifts[k] * mult[k])
            for j in range(self.heads):
                out.append(mix % int(self.sizes[layer][n - 2][j]))
        return np.stack(out, axis=2)[0]  # [T, orders*heads]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", required=True)
    ap.add_argument("--layers", required=True)
    ap.add_argument("--max-order", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--base", required=True, help="one base size, or one per order, comma-separated")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--pad", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--time", action="store_true", help="print seconds spent hashing to stderr")
    a = ap.parse_args()
    layers = [int(v) for v in a.layers.split(",")]
    base = [int(v) for v in a.base.split(",")]
    if len(base) == 1:
        base = base * (a.max_order - 1)
    h = NgramHashing(layers, a.max_order, a.heads, base, a.vocab, a.pad, a.seed)
    ids = np.fromfile(a.ids, dtype="<u4").astype(np.int64)
    t0 = time.perf_counter()
    res = [h.hash_layer(ids, layer) for layer in layers]
    dt = time.perf_counter() - t0
    if a.time:
        print(f"{dt:.6f}", file=sys.stderr)
    if a.out:
        np.stack(res).astype("<i8").tofile(a.out)


if __name__ == "__main__":
    main()

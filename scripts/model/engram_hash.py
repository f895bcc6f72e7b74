"""Native Engram addressing in Python (schemas/table_format.md §4.1), for the PyTorch reference:
XXH3-64 per (layer, order, head) seeds, power-of-two masks, owner tags. Bit-identical to
engramctl (tests/model_parity checks it against `engramctl lookup`)."""
import struct

import numpy as np
import xxhash


def subtable_seed(table_seed, layer_id, order, head):
    return xxhash.xxh3_64_intdigest(struct.pack("<III", layer_id, order, head), seed=table_seed)


class NativeAddressing:
    def __init__(self, layer_ids, max_order, n_heads, log2_buckets, pad_id, seed=0):
        self.layer_ids = list(layer_ids)
        self.max_order = max_order
        self.n_heads = n_heads
        self.mask = (1 << log2_buckets) - 1
        self.buckets = 1 << log2_buckets
        self.pad_id = pad_id
        self.seeds = {(l, n, h): subtable_seed(seed, l, n, h)
                      for l in self.layer_ids for n in range(2, max_order + 1) for h in range(n_heads)}
        self.per_layer = (max_order - 1) * n_heads

    def row_offset(self, layer_index, order, head):
        return ((layer_index * (self.max_order - 1) + (order - 2)) * self.n_heads + head) * self.buckets

    def rows(self, canon, history=()):
        """Global table rows for every position of `canon` (a list of canonical ids), given the
        canonical ids before it in the same document (`history`; pad before the start).
        Returns int64 [len(canon), n_layers, per_layer]."""
        hist = list(history)[-(self.max_order - 1):]
        ids = [self.pad_id] * (self.max_order - 1 - len(hist)) + hist + list(canon)
        T = len(canon)
        out = np.empty((T, len(self.layer_ids), self.per_layer), dtype=np.int64)
        base = self.max_order - 1
        for t in range(T):
            cur = base + t
            for n in range(2, self.max_order + 1):
                gram = struct.pack("<%dI" % n, *ids[cur - n + 1:cur + 1])
                for li, layer in enumerate(self.layer_ids):
                    for h in range(self.n_heads):
                        b = xxhash.xxh3_64_intdigest(gram, seed=self.seeds[(layer, n, h)]) & self.mask
                        out[t, li, (n - 2) * self.n_heads + h] = self.row_offset(li, n, h) + b
        return out

#!/usr/bin/python3
"""Why unrelated prompts change after `append --fit` (issue 12's control prompts): for each prompt,
the rows it reads whose value the fit changed (hash collisions with the fitted n-grams' rows),
and for each prompt whose first greedy token changed, its base lead (top-1 minus top-2 logit)
and which of those rows, put back alone, restore the token. Used by bench/bench_fit.sh.

  fit_collateral.py --model DIR --engramctl BIN --base BASE.engram --fitted FITTED.engram \
                    --prompts PROMPTS.txt [--threads 2]

The tables are read through `engramctl export` (journal applied); the model is the PyTorch
reference (scripts/model/engram_model.py), so first tokens are taken from its float32 logits.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "model"))
from engram_hash import NativeAddressing  # noqa: E402
from engram_model import load_config, load_model, read_safetensors  # noqa: E402
from fit_reference import FittedRows, hidden, tokenize  # noqa: E402


def read_rows(engramctl, table):
    """The table's rows as float32 [rows, row_dim], through `engramctl export`."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        subprocess.check_call([engramctl, "-q", "export", table, "-o", path])
        return read_safetensors(path)["engram.table.weight"].float()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engramctl", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--fitted", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    base, fitted = read_rows(a.engramctl, a.base), read_rows(a.engramctl, a.fitted)
    cfg = load_config(a.model)["engram"]
    n_sub = len(cfg["layer_ids"]) * (cfg["max_ngram_size"] - 1) * cfg["n_head_per_ngram"]
    # A table built with --tile-values has more buckets per sub-table than the model.
    model = load_model(a.model, log2_buckets=(base.shape[0] // n_sub).bit_length() - 1)
    model.requires_grad_(False)
    e = model.cfg["engram"]
    tok = os.path.join(a.model, "tokenizer.json")
    canon_map = np.frombuffer(subprocess.check_output(
        [a.engramctl, "-q", "tokenize", "--tokenizer", tok, "--canonical-map", "-o", "-"]), dtype="<u4")
    pad = int(canon_map[e.get("pad_token_id", 0)])
    addr = NativeAddressing(e["layer_ids"], e["max_ngram_size"], e["n_head_per_ngram"],
                            e["log2_buckets"], pad, e["seed"])
    changed = (fitted != base).any(1)
    lines = [l.rstrip("\n") for l in open(a.prompts) if l.strip()]
    ids, can = tokenize(a.engramctl, tok, lines, False), tokenize(a.engramctl, tok, lines, True)

    def last_logits(i, table):
        rows = torch.from_numpy(addr.rows(can[i]))[None]
        h = hidden(model, torch.tensor([ids[i]]), rows, torch.arange(len(ids[i])), FittedRows(table, []))
        return model.logits(h[:, -1])[0]

    reading, flips = 0, []
    for i in range(len(lines)):
        r = addr.rows(can[i]).reshape(-1)
        hit = sorted({int(x) for x in r if changed[x]})
        reading += bool(hit)
        if not hit:
            continue
        lb, lf = last_logits(i, base), last_logits(i, fitted)
        t0, t1 = int(lb.argmax()), int(lf.argmax())
        if t0 == t1:
            continue
        top = lb.topk(2).values
        restores = []
        for row in hit:
            t = fitted.clone()
            t[row] = base[row]
            restores.append(int(last_logits(i, t).argmax()) == t0)
        flips.append((i, float(top[0] - top[1]), hit, restores))
    n = len(lines)
    print(f"prompts reading a row the fit changed: {reading}/{n}; first token changed: {len(flips)}/{n}")
    for i, lead, hit, restores in flips:
        delta = [float((fitted[r] - base[r]).norm()) for r in hit]
        print(f"  {i + 1}: {lines[i]!r}: base lead {lead:.3f}; reads {len(hit)} changed row(s) "
              f"(change norms {', '.join(f'{d:.1f}' for d in delta)}); putting back one alone restores "
              f"the token for {sum(restores)} of them")
    norms = (fitted - base)[changed].norm(dim=1)
    if len(norms):
        print(f"changed rows: {int(changed.sum())}, change norm median {float(norms.median()):.2f} "
              f"(base row norm median {float(base.norm(dim=1).median()):.3f})")


if __name__ == "__main__":
    main()

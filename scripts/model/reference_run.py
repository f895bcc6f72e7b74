#!/usr/bin/python3
"""Runs the PyTorch reference of the MoE+Engram model (engram_model.py) the way `engramctl run`
does: greedy/temperature-free generation with a KV cache, or perplexity with the same windows.
Token ids and canonical ids come from engramctl (`tokenize`), Engram rows from the model's
`engram.table.weight` (the same bits engramctl exports into the table).

  reference_run.py --model DIR --engramctl BIN --prompts FILE [-n 32] [--threads 2]
                   [--dump-logits OUT.f32] [--perplexity] [--no-engram] [--json OUT.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engram_hash import NativeAddressing  # noqa: E402
from engram_model import load_model  # noqa: E402

SEP = 0xFFFFFFFF


def tokenize(engramctl, tokenizer, prompts_file, canonical):
    args = [engramctl, "-q", "tokenize", "--tokenizer", tokenizer, "-f", prompts_file, "--lines", "-o", "-"]
    if canonical:
        args.append("--canonical")
    raw = np.frombuffer(subprocess.check_output(args), dtype="<u4")
    docs, cur = [], []
    for v in raw:
        if v == SEP:
            docs.append(cur)
            cur = []
        else:
            cur.append(int(v))
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--engramctl", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dump-logits")
    ap.add_argument("--perplexity", action="store_true")
    ap.add_argument("--no-engram", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--log2-buckets", type=int, default=0,
                    help="buckets per sub-table of the table engramctl reads, when it has more than the model's "
                         "(built with --tile-values): the model's table is tiled to match")
    ap.add_argument("--window", type=int, default=512, help="perplexity window (tokens)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    model = load_model(a.model, log2_buckets=a.log2_buckets)
    cfg = model.cfg
    e = cfg["engram"]
    tok = os.path.join(a.model, "tokenizer.json")
    ids_docs = tokenize(a.engramctl, tok, a.prompts, False)
    canon_docs = tokenize(a.engramctl, tok, a.prompts, True)
    canon_map = np.frombuffer(subprocess.check_output(
        [a.engramctl, "-q", "tokenize", "--tokenizer", tok, "--canonical-map", "-o", "-"]), dtype="<u4")
    pad = int(canon_map[e.get("pad_token_id", 0)])
    addr = NativeAddressing(e["layer_ids"], e["max_ngram_size"], e["n_head_per_ngram"], e["log2_buckets"], pad, e["seed"])
    load_s = time.perf_counter() - t0
    use_engram = not a.no_engram
    eos = cfg.get("eos_token_id", -1)
    out = {"prompts": []}
    logit_chunks = []
    prompt_s = eval_s = 0.0
    prompt_tokens = eval_tokens = 0
    with torch.no_grad():
        for ids, canon in zip(ids_docs, canon_docs):
            rec = {"prompt_ids": ids, "output_ids": []}
            if a.perplexity:
                nll, n = 0.0, 0
                t1 = time.perf_counter()
                for w0 in range(0, len(ids), a.window):
                    w1 = min(len(ids), w0 + a.window)
                    caches = [dict() for _ in model.layers]
                    rows = torch.from_numpy(addr.rows(canon[w0:w1], history=canon[:w0]))[None]
                    h = model.hidden(torch.tensor([ids[w0:w1]]), rows, torch.arange(w1 - w0), caches, use_engram)
                    lg = model.logits(h)[0]
                    if a.dump_logits:
                        logit_chunks.append(lg.float().numpy().astype("<f4"))
                    lp = torch.log_softmax(lg.double(), -1)
                    for t in range(w0, w1):
                        if t + 1 < len(ids):
                            nll -= lp[t - w0, ids[t + 1]].item()
                            n += 1
                prompt_s += time.perf_counter() - t1
                prompt_tokens += len(ids)
                rec["nll"], rec["scored_tokens"] = nll, n
                out["prompts"].append(rec)
                continue
            caches = [dict() for _ in model.layers]
            t1 = time.perf_counter()
            rows = torch.from_numpy(addr.rows(canon))[None]
            h = model.hidden(torch.tensor([ids]), rows, torch.arange(len(ids)), caches, use_engram)
            lg = model.logits(h[:, -1])[0]
            prompt_s += time.perf_counter() - t1
            prompt_tokens += len(ids)
            t2 = time.perf_counter()
            hist = list(canon)
            pos = len(ids)
            for step in range(a.n):
                if a.dump_logits:
                    logit_chunks.append(lg.float().numpy().astype("<f4")[None])
                nxt = int(torch.argmax(lg).item())
                if nxt == eos:
                    break
                rec["output_ids"].append(nxt)
                eval_tokens += 1
                if step + 1 == a.n:
                    break
                c = int(canon_map[nxt]) if nxt < len(canon_map) else 0
                rows = torch.from_numpy(addr.rows([c], history=hist))[None]
                hist.append(c)
                h = model.hidden(torch.tensor([[nxt]]), rows, torch.tensor([pos]), caches, use_engram)
                pos += 1
                lg = model.logits(h[:, -1])[0]
            eval_s += time.perf_counter() - t2
            out["prompts"].append(rec)
    out.update({"load_seconds": load_s, "prompt_seconds": prompt_s, "eval_seconds": eval_s,
                "prompt_tokens": prompt_tokens, "eval_tokens": eval_tokens})
    if a.dump_logits:
        with open(a.dump_logits, "wb") as f:
            for c in logit_chunks:
                f.write(c.tobytes())
    text = json.dumps(out)
    if a.json:
        open(a.json, "w").write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

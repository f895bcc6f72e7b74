#!/usr/bin/python3
"""PyTorch speed and quality anchor for `engramctl append --fit`: fits the Engram rows of a batch
of facts through the frozen reference model (engram_model.py) and reports how long it took and
whether the model then says each fact.

  fit_reference.py --model DIR --engramctl BIN --facts FILE.jsonl [--threads 1] [--steps 300]
                   [--lr 0.05] [--l2 1e-3] [--margin 1.0] [--beta1 0] [--positions last|all] [--limit N]
                   [--vocab full|seen] [--extra-checks] [--verbose] [--json OUT.json]

FILE.jsonl holds one {"prompt": ..., "target": ...} object a line (bench/facts/facts50.jsonl; its
"paraphrase" and "control" fields are used by --extra-checks only). Token ids, canonical ids and
the canonical map come from `engramctl tokenize` exactly as reference_run.py gets them; prompt and
target are tokenized separately and concatenated.

The fit, per fact f with ids = prompt_ids + target_ids:
  target positions P_f = len(prompt_ids)-1 .. len(ids)-2 (position p predicts ids[p+1]);
  trainable rows = for each p in P_f (--positions last) or in 0..len(ids)-2 (all), each Engram
  layer, each order n with p+1 >= n (a full n-gram), each head: the global table row p reads
  (NativeAddressing); the union over the batch is one parameter R [rows, row_dim] (R0 = its
  initial value from engram.table.weight). All facts go in one right-padded batch; each step is
  one forward; a fact is satisfied when at every p in P_f the target logit beats every other
  logit by >= margin; stop when all are; else loss = sum over unsatisfied facts of the mean
  cross-entropy over P_f + l2 * sum((R - R0)^2), one Adam step on R.
`seconds` times that loop only (not loading, tokenizing or addressing). Afterwards each prompt is
greedy-decoded for len(target_ids) tokens with a KV cache (as reference_run.py does) over the
fitted rows, in float32 and again after rounding the fitted rows to bf16 (the table's dtype).
--extra-checks also decodes each paraphrase (same check) and each control prompt's first token
before and after the fit (an unrelated prompt should keep it).

On the demo model and bench/facts/facts50.jsonl the spec defaults (lr 0.05, l2 1e-3) do not
converge: the rows must move far (change norm ~10 against a row norm ~0.19) and the L2 pull stops
them first. --l2 0 --lr 0.2 satisfies all facts in ~170 steps. A position whose target token
cannot reach the margin even at the cross-entropy optimum of the frozen head (some rare tokens sit
close to a neighbour, and ~94k never-seen tokens keep logit 0) never satisfies; greedy still works.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engram_hash import NativeAddressing  # noqa: E402
from engram_model import load_model  # noqa: E402
from reference_run import tokenize as read_token_docs  # noqa: E402


def tokenize(engramctl, tokenizer, lines, canonical):
    """Token (or canonical) ids of each line, through reference_run.tokenize's file reader."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        docs = read_token_docs(engramctl, tokenizer, path, canonical)
    finally:
        os.unlink(path)
    if len(docs) != len(lines):
        raise SystemExit(f"tokenize returned {len(docs)} documents for {len(lines)} lines")
    return docs


class FittedRows:
    """The frozen table plus trainable rows R for a set of global row ids."""

    def __init__(self, table, row_ids):
        self.table = table  # [total_rows, row_dim], frozen
        self.row_ids = sorted(row_ids)
        self.local = {r: i for i, r in enumerate(self.row_ids)}
        idx = torch.tensor(self.row_ids, dtype=torch.long)
        self.R0 = table[idx].clone()
        self.R = torch.nn.Parameter(self.R0.clone())
        # global row -> local index (-1 = frozen), as a dense lookup
        self.lut = torch.full((table.shape[0],), -1, dtype=torch.long)
        self.lut[idx] = torch.arange(len(self.row_ids))

    def gather(self, rows, R=None):
        """rows int64 [..., k] -> [..., k, row_dim] with trainable rows taken from R."""
        R = self.R if R is None else R
        base = self.table[rows]
        loc = self.lut[rows]
        m = loc >= 0
        if not bool(m.any()):
            return base
        return torch.where(m.unsqueeze(-1), R[loc.clamp_min(0)], base)


def hidden(model, ids, rows, positions, fitted, R=None, caches=None):
    """model.hidden with the Engram rows gathered through `fitted` (R for trainable rows)."""
    h = model.embed_tokens(ids)
    B, T = ids.shape
    for i, layer in enumerate(model.layers):
        e = None
        if layer.engram is not None:
            li = model.engram_layer_index[i]
            e = fitted.gather(rows[:, :, li], R).reshape(B, T, -1)
        h = layer(h, positions, e, caches[i] if caches is not None else None)
    return model.norm(h)


def greedy(model, addr, canon_map, fitted, ids, canon, n, R=None, eos=-1):
    caches = [dict() for _ in model.layers]
    rows = torch.from_numpy(addr.rows(canon))[None]
    h = hidden(model, torch.tensor([ids]), rows, torch.arange(len(ids)), fitted, R, caches)
    lg = model.logits(h[:, -1])[0]
    hist, pos, out = list(canon), len(ids), []
    for step in range(n):
        nxt = int(torch.argmax(lg).item())
        if nxt == eos:
            break
        out.append(nxt)
        if step + 1 == n:
            break
        c = int(canon_map[nxt]) if nxt < len(canon_map) else 0
        rows = torch.from_numpy(addr.rows([c], history=hist))[None]
        hist.append(c)
        h = hidden(model, torch.tensor([[nxt]]), rows, torch.tensor([pos]), fitted, R, caches)
        pos += 1
        lg = model.logits(h[:, -1])[0]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engramctl", required=True)
    ap.add_argument("--facts", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--margin", type=float, default=1.0)
    ap.add_argument("--beta1", type=float, default=0.0,
                    help="Adam beta1 (engramctl uses 0: no momentum past the point a fact is fitted)")
    ap.add_argument("--positions", choices=["last", "all"], default="last")
    ap.add_argument("--vocab", choices=["full", "seen"], default="full",
                    help="score the whole vocabulary, or only tokens with a non-zero (tied) embedding row: exact, faster")
    ap.add_argument("--limit", type=int, default=0, help="fit only the first N facts")
    ap.add_argument("--extra-checks", action="store_true", help="also paraphrases and control prompts")
    ap.add_argument("--verbose", action="store_true", help="per-step progress on stderr")
    ap.add_argument("--json")
    ap.add_argument("--log2-buckets", type=int, default=0,
                    help="buckets per sub-table of the table engramctl reads, when it has more than the model's "
                         "(built with --tile-values): the model's table is tiled to match")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    facts = [json.loads(l) for l in open(a.facts) if l.strip()]
    if a.limit:
        facts = facts[:a.limit]
    t0 = time.perf_counter()
    model = load_model(a.model, log2_buckets=a.log2_buckets)
    model.requires_grad_(False)
    cfg = model.cfg
    e = cfg["engram"]
    eos = cfg.get("eos_token_id", -1)
    tok = os.path.join(a.model, "tokenizer.json")
    canon_map = np.frombuffer(subprocess.check_output(
        [a.engramctl, "-q", "tokenize", "--tokenizer", tok, "--canonical-map", "-o", "-"]), dtype="<u4")
    pad = int(canon_map[e.get("pad_token_id", 0)])
    addr = NativeAddressing(e["layer_ids"], e["max_ngram_size"], e["n_head_per_ngram"], e["log2_buckets"], pad, e["seed"])
    prompts = [f["prompt"] for f in facts]
    targets = [f["target"] for f in facts]
    p_ids, t_ids = tokenize(a.engramctl, tok, prompts, False), tokenize(a.engramctl, tok, targets, False)
    p_can, t_can = tokenize(a.engramctl, tok, prompts, True), tokenize(a.engramctl, tok, targets, True)
    load_s = time.perf_counter() - t0

    # Addressing and the trainable row set.
    t1 = time.perf_counter()
    max_order, n_heads = e["max_ngram_size"], e["n_head_per_ngram"]
    n_layers = len(e["layer_ids"])
    seqs, cans, all_rows, P = [], [], [], []
    trainable = set()
    for pi, ti, pc, tc in zip(p_ids, t_ids, p_can, t_can):
        if not pi or not ti:
            raise SystemExit("a prompt or target tokenized to nothing")
        ids, can = pi + ti, pc + tc
        rows = addr.rows(can)  # [T, layers, (order-2)*heads + head]
        pf = list(range(len(pi) - 1, len(ids) - 1))
        span = pf if a.positions == "last" else list(range(0, len(ids) - 1))
        for p in span:
            for li in range(n_layers):
                for n in range(2, max_order + 1):
                    if p + 1 < n:
                        continue
                    for hd in range(n_heads):
                        trainable.add(int(rows[p, li, (n - 2) * n_heads + hd]))
        seqs.append(ids)
        cans.append(can)
        all_rows.append(rows)
        P.append(pf)
    table = model.engram.table.weight.detach()
    fitted = FittedRows(table, trainable)
    B, T = len(seqs), max(len(s) for s in seqs)
    ids_b = torch.zeros(B, T, dtype=torch.long)
    rows_b = torch.zeros(B, T, n_layers, all_rows[0].shape[2], dtype=torch.long)
    for b, (s, r) in enumerate(zip(seqs, all_rows)):
        ids_b[b, :len(s)] = torch.tensor(s)
        rows_b[b, :len(s)] = torch.from_numpy(r)
    # Flattened target positions: (batch, position, target id, fact).
    tb = torch.tensor([b for b in range(B) for _ in P[b]])
    tp = torch.tensor([p for b in range(B) for p in P[b]])
    tt = torch.tensor([seqs[b][p + 1] for b in range(B) for p in P[b]])
    tf = tb.clone()
    counts = torch.bincount(tf, minlength=B).float()
    positions = torch.arange(T)
    prep_s = time.perf_counter() - t1

    # Output head. --vocab seen: the head is tied to embed_tokens and the rows of tokens never seen
    # in training are exactly zero, so their logits are exactly 0; score the seen rows only and
    # stand for the zero logits by one extra column (log(count) in the softmax, 0 in the max).
    # Same loss and margins as --vocab full up to float summation order.
    W = model.embed_tokens.weight
    tt_head = tt
    n_zero = 0
    if a.vocab == "seen":
        seen = (W != 0).any(1)
        if not bool(seen[tt].all()):
            raise SystemExit("--vocab seen: a target token has an all-zero embedding row")
        seen_idx = seen.nonzero()[:, 0]
        n_zero = int((~seen).sum())
        remap = torch.full((W.shape[0],), -1, dtype=torch.long)
        remap[seen_idx] = torch.arange(len(seen_idx))
        W = W[seen_idx].contiguous()
        tt_head = remap[tt]

    def evaluate(R=None):
        h = hidden(model, ids_b, rows_b, positions, fitted, R)
        ht = h[tb, tp]
        lg = ht @ W.t()  # [N, V] (or [N, seen])
        with torch.no_grad():
            top = lg.topk(2, dim=1)
            other = torch.where(top.indices[:, 0] == tt_head, top.values[:, 1], top.values[:, 0])
            if n_zero:
                other = other.clamp_min(0.0)
            marg = lg.gather(1, tt_head[:, None])[:, 0] - other
        ok = torch.zeros(B).index_add(0, tf, (marg < a.margin).float()) == 0
        return ht, lg, marg, ok

    # The fit loop.
    opt = torch.optim.Adam([fitted.R], lr=a.lr, betas=(a.beta1, 0.999))
    steps, history = 0, []
    t2 = time.perf_counter()
    while True:
        ht, lg, marg, ok = evaluate()
        n_ok = int(ok.sum())
        if n_ok == B or steps >= a.steps:
            break
        # Only the unsatisfied facts' positions enter the loss: the same value as masking per fact.
        sel = (~ok)[tf].nonzero()[:, 0]
        lg_u = lg if len(sel) == len(tt) else ht[sel] @ W.t()
        if n_zero:
            lg_u = torch.cat([lg_u, lg_u.new_full((lg_u.shape[0], 1), math.log(n_zero))], dim=1)
        ce = F.cross_entropy(lg_u, tt_head[sel], reduction="none")
        loss = (ce / counts[tf[sel]]).sum() + a.l2 * (fitted.R - fitted.R0).pow(2).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if a.verbose and (steps % 10 == 0 or steps == 1):
            print(f"step {steps} satisfied {n_ok}/{B} loss {loss.item():.4f} "
                  f"{time.perf_counter() - t2:.1f}s", file=sys.stderr)
        history.append(n_ok)
    fit_s = time.perf_counter() - t2

    # Checks after the fit.
    with torch.no_grad():
        R32 = fitted.R.detach().clone()
        Rbf = R32.to(torch.bfloat16).float()
        _, _, marg_bf, ok_bf = evaluate(Rbf)
        delta = (R32 - fitted.R0).norm(dim=1)
        per = []
        for b, f in enumerate(facts):
            pi, ti = p_ids[b], t_ids[b]
            g32 = greedy(model, addr, canon_map, fitted, pi, p_can[b], len(ti), R32, eos)
            gbf = greedy(model, addr, canon_map, fitted, pi, p_can[b], len(ti), Rbf, eos)
            sel = tf == b
            rec = {"prompt": f["prompt"], "target": f["target"], "target_ids": ti,
                   "satisfied": bool(ok[b]), "min_margin": float(marg[sel].min()),
                   "margins": [round(float(x), 4) for x in marg[sel]],
                   "greedy_ids": g32, "greedy_ok": g32 == ti,
                   "greedy_bf16_ids": gbf, "greedy_bf16_ok": gbf == ti}
            per.append(rec)
        extra = {}
        if a.extra_checks:
            para = [f.get("paraphrase", f["prompt"]) for f in facts]
            ctrl = [f.get("control", "The") for f in facts]
            q_ids, q_can = tokenize(a.engramctl, tok, para, False), tokenize(a.engramctl, tok, para, True)
            c_ids, c_can = tokenize(a.engramctl, tok, ctrl, False), tokenize(a.engramctl, tok, ctrl, True)
            n_para = n_ctrl_changed = 0
            for b in range(B):
                gq = greedy(model, addr, canon_map, fitted, q_ids[b], q_can[b], len(t_ids[b]), Rbf, eos)
                c0 = greedy(model, addr, canon_map, fitted, c_ids[b], c_can[b], 1, fitted.R0, eos)
                c1 = greedy(model, addr, canon_map, fitted, c_ids[b], c_can[b], 1, Rbf, eos)
                per[b]["paraphrase_bf16_ok"] = gq == t_ids[b]
                per[b]["control_first_token_changed"] = c0 != c1
                n_para += gq == t_ids[b]
                n_ctrl_changed += c0 != c1
            extra = {"paraphrase_success_bf16": n_para, "control_first_token_changed_bf16": n_ctrl_changed}

    out = {"facts": B, "rows": len(fitted.row_ids), "steps": steps, "seconds": fit_s,
           "seconds_per_fact": fit_s / B, "seconds_per_step": fit_s / max(1, steps),
           "satisfied": int(ok.sum()), "satisfied_bf16": int(ok_bf.sum()),
           "greedy_success": sum(r["greedy_ok"] for r in per),
           "greedy_success_bf16": sum(r["greedy_bf16_ok"] for r in per), **extra,
           "target_positions": int(tt.numel()), "batch_tokens": B * T,
           "row_change_norm_mean": float(delta.mean()), "row_change_norm_max": float(delta.max()),
           "row_norm_mean_before": float(fitted.R0.norm(dim=1).mean()),
           "load_seconds": load_s, "prep_seconds": prep_s,
           "settings": {"threads": a.threads, "steps": a.steps, "lr": a.lr, "l2": a.l2, "margin": a.margin,
                        "positions": a.positions, "vocab": a.vocab, "limit": a.limit},
           "satisfied_history": history, "per_fact": per}
    text = json.dumps(out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
        brief = {k: v for k, v in out.items() if k not in ("per_fact", "satisfied_history")}
        print(json.dumps(brief))
    else:
        print(text)


if __name__ == "__main__":
    main()

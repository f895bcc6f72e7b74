#!/usr/bin/python3
"""Trains the small MoE+Engram demo model on the Brown corpus with the DeepSeek-V3 tokenizer
(2 CPU cores, well under an hour) and writes an HF-style model directory.

  scripts/model/train_demo.sh    (the exact command that regenerates assets/demo-model)

Inputs come from engramctl itself: token ids (`engramctl tokenize --lines -o`) and canonical ids
(`... --canonical`). The output embedding is tied to the input embedding; tokens never seen in the
training text keep all-zero rows, so their logits are exactly 0 and training uses the exact full-
vocabulary softmax: the n_unused zero rows add n_unused * e^0 to the partition function.

Engram rows of n-grams that occur only once or twice in the training text would simply memorise the
next token of those occurrences, and held-out text consists mostly of such (or unseen) n-grams: a
model trained on them trusts its memory where it should not, and does worse with the table than
without it. So n-grams rarer than --rare-count (and a --row-noise share of the rest, as hash
collisions would) read random rows of their sub-table while training; the gate learns to tell
memory that matches the context from memory that does not.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engram_hash import NativeAddressing  # noqa: E402
from engram_model import EngramMoE, write_safetensors  # noqa: E402

SEP = 0xFFFFFFFF


def split_docs(a):
    docs, cur = [], []
    cut = np.flatnonzero(a == SEP)
    start = 0
    for c in cut:
        if c > start:
            docs.append(a[start:c].astype(np.int64))
        start = c + 1
    if start < len(a):
        docs.append(a[start:].astype(np.int64))
    return docs


def demo_config(vocab_size, pad_token, tokenizer_fingerprint, seq=128, max_ngram=4):
    return {
        "architectures": ["EngramMoEForCausalLM"],
        "model_type": "deepseek_engram",
        "vocab_size": vocab_size,
        "hidden_size": 128,
        "intermediate_size": 384,
        "moe_intermediate_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "scoring_func": "softmax",
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "topk_method": "greedy",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": seq,  # the context it was trained on
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "bfloat16",
        "engram": {
            "layer_ids": [1, 3],
            "max_ngram_size": max_ngram,
            "n_embed_per_ngram": 64,
            "n_head_per_ngram": 4,
            "kernel_size": 4,
            "addressing": "native",
            "log2_buckets": 14,
            "seed": 0,
            "pad_token_id": pad_token,
            "tokenizer_fingerprint": tokenizer_fingerprint,
        },
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", required=True, help="u32 token ids of the training text (0xFFFFFFFF between documents)")
    ap.add_argument("--canon", required=True, help="the same text as canonical ids")
    ap.add_argument("--out", required=True)
    ap.add_argument("--fingerprint", default="", help="tokenizer fingerprint (engramctl inspect) to record")
    ap.add_argument("--pad-canonical", type=int, required=True, help="canonical id of the pad token (token 2)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--table-lr-mult", type=float, default=1.0, help="learning-rate multiplier of the Engram rows")
    ap.add_argument("--table-wd", type=float, default=0.1, help="weight decay of the Engram rows")
    ap.add_argument("--table-init-std", type=float, default=0.02)
    ap.add_argument("--engram-drop", type=float, default=0.05,
                    help="fraction of training batches run without Engram (keeps the gate calibrated)")
    ap.add_argument("--rare-count", type=int, default=3,
                    help="n-grams seen fewer times in the training text read random rows of their sub-table "
                         "(their rows would memorise the very tokens being predicted; held-out text mostly has "
                         "such n-grams, so the model must learn to gate them out)")
    ap.add_argument("--row-noise", type=float, default=0.1,
                    help="probability that any other n-gram also reads random rows (hash collisions)")
    ap.add_argument("--max-ngram", type=int, default=4,
                    help="N: the Engram rows hash orders 2..N (the demo model: 4, as V4.1's layout; with 3 a "
                         "fact's top-order rows are its prompt's last 3 tokens, which many near misses share)")
    ap.add_argument("--minutes", type=float, default=0.0, help="if > 0, stop early (and save) after this long")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    t_start = time.time()

    ids_docs = split_docs(np.fromfile(a.ids, dtype="<u4"))
    canon_docs = split_docs(np.fromfile(a.canon, dtype="<u4"))
    assert len(ids_docs) == len(canon_docs) and all(len(x) == len(y) for x, y in zip(ids_docs, canon_docs))
    vocab_size = 129280
    cfg = demo_config(vocab_size, 2, a.fingerprint, a.seq, a.max_ngram)
    e = cfg["engram"]
    addr = NativeAddressing(e["layer_ids"], e["max_ngram_size"], e["n_head_per_ngram"], e["log2_buckets"],
                            a.pad_canonical, e["seed"])
    cache = f"{a.out}.rows-n{e['max_ngram_size']}.npy"  # the addressing depends on N
    if os.path.exists(cache):
        rows_all = np.load(cache)
    else:
        rows_all = np.concatenate([addr.rows(d.tolist()) for d in canon_docs])
        np.save(cache, rows_all)
    print(f"addressing done in {time.time() - t_start:.0f}s: {rows_all.shape}", flush=True)
    # Training-text count of the n-gram (orders 2..N) ending at every position (history padded as
    # the table's addressing pads it); canonical ids fit in 17 bits, so an n-gram is a pair of int64
    # keys: its tokens before the last three (0 for orders <= 3), and those three.
    N = e["max_ngram_size"]
    assert 2 <= N <= 6 and max(int(d.max()) for d in canon_docs if len(d)) < (1 << 17)
    counts = {}
    for n in range(2, N + 1):
        hi_keys, keys = [], []
        for d in canon_docs:
            p = np.concatenate([np.full(N - 1, a.pad_canonical, dtype=np.int64), d.astype(np.int64)])
            hi = np.zeros(len(d), dtype=np.int64)
            k = np.zeros(len(d), dtype=np.int64)
            for j in range(n):
                col = p[N - n + j:N - n + j + len(d)]
                if j < n - 3:
                    hi = (hi << 17) | col
                else:
                    k = (k << 17) | col
            hi_keys.append(hi)
            keys.append(k)
        _, inv, cnt = np.unique(np.stack([np.concatenate(hi_keys), np.concatenate(keys)], axis=1), axis=0,
                                return_inverse=True, return_counts=True)
        counts[n] = cnt[inv.reshape(-1)]
        print(f"order {n}: {len(cnt)} distinct, {np.mean(counts[n] < a.rare_count):.2f} of positions rarer than "
              f"{a.rare_count}", flush=True)
    heads, log2 = e["n_head_per_ngram"], e["log2_buckets"]
    flat_ids = np.concatenate(ids_docs)
    starts = np.cumsum([0] + [len(d) for d in ids_docs])

    used = np.unique(flat_ids)
    used_t = torch.from_numpy(used)
    remap = torch.full((vocab_size,), -1, dtype=torch.long)
    remap[used_t] = torch.arange(len(used))
    n_unused = vocab_size - len(used)
    print(f"{len(flat_ids)} tokens in {len(ids_docs)} documents, {len(used)} distinct ids ({n_unused} unused)", flush=True)

    model = EngramMoE(cfg)
    model.embed_tokens.weight.requires_grad_(False)
    # Only the rows of tokens in the training text are trained (the rest stay exactly zero).
    emb_used = torch.nn.Parameter(torch.randn(len(used), cfg["hidden_size"]) * 0.02)
    with torch.no_grad():
        model.engram.table.weight.normal_(0, a.table_init_std)
    table_params = [model.engram.table.weight]
    other = [emb_used] + [p for n, p in model.named_parameters() if n not in ("engram.table.weight", "embed_tokens.weight")]
    opt = torch.optim.AdamW([{"params": other, "weight_decay": 0.05},
                             {"params": table_params, "weight_decay": a.table_wd, "lr_mult": a.table_lr_mult}],
                            lr=a.lr, betas=(0.9, 0.95))
    log_unused = math.log(n_unused)
    doc_ok = [i for i, d in enumerate(ids_docs) if len(d) > a.seq + 1]
    model.train()
    step = 0
    for step in range(1, a.steps + 1):
        warm = min(1.0, step / 100)
        lr = a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_mult", 1.0)
        x = np.empty((a.batch, a.seq + 1), dtype=np.int64)
        r = np.empty((a.batch, a.seq + 1) + rows_all.shape[1:], dtype=np.int64)
        for b in range(a.batch):
            d = doc_ok[rng.integers(len(doc_ok))]
            o = starts[d] + rng.integers(len(ids_docs[d]) - a.seq - 1)
            x[b] = flat_ids[o:o + a.seq + 1]
            r[b] = rows_all[o:o + a.seq + 1]
            for n in range(2, N + 1):
                m = (counts[n][o:o + a.seq + 1] < a.rare_count) | (rng.random(a.seq + 1) < a.row_noise)
                cols = slice((n - 2) * heads, (n - 1) * heads)
                sub = r[b][m][:, :, cols]
                r[b, m, :, cols] = (sub >> log2 << log2) + rng.integers(0, 1 << log2, size=sub.shape)
        xin = torch.from_numpy(x[:, :-1])
        tgt = remap[torch.from_numpy(x[:, 1:])]
        rows = torch.from_numpy(r[:, :-1])
        use_engram = rng.random() >= a.engram_drop
        h = model.hidden(xin, rows, torch.arange(a.seq), use_engram=use_engram, embeds=emb_used[remap[xin]])
        logits = h @ emb_used.t()
        # Full-vocabulary cross-entropy: the unused tokens' zero rows form one extra column of
        # value log(n_unused) (their summed e^0 mass).
        extra = torch.full(logits.shape[:-1] + (1,), log_unused)
        nll = F.cross_entropy(torch.cat([logits, extra], dim=-1).flatten(0, 1), tgt.flatten())
        aux = sum(l.mlp.aux_loss for l in model.layers if getattr(l.mlp, "aux_loss", None) is not None)
        loss = nll + 0.01 * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g['params']], 1.0)
        opt.step()
        if step % 25 == 0 or step == 1:
            el = time.time() - t_start
            print(f"step {step} loss {nll.item():.4f} ppl {math.exp(nll.item()):.1f} lr {lr:.2e} {el:.0f}s", flush=True)
        if a.minutes > 0 and (time.time() - t_start) / 60 > a.minutes:
            print(f"time budget reached at step {step}", flush=True)
            break
    model.eval()
    with torch.no_grad():
        model.embed_tokens.weight.zero_()
        model.embed_tokens.weight[used_t] = emb_used.detach()
    os.makedirs(a.out, exist_ok=True)
    cfg["training"] = {"steps": step, "batch": a.batch, "seq": a.seq, "tokens_seen": step * a.batch * a.seq,
                       "final_train_nll": round(nll.item(), 4), "seconds": round(time.time() - t_start)}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    sd = {k: v.detach().to(torch.bfloat16) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(a.out, "model.safetensors"), sd, {"format": "pt"})
    print(f"saved {a.out} after {step} steps in {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()

"""PyTorch reference implementation of the MoE+Engram decoder that `engramctl run` executes
(lib/engram/model mirrors it op for op). DeepSeek-style: RMSNorm, RoPE multi-head attention
with a KV cache, SwiGLU experts, shared + routed experts, top-k routing with softmax or sigmoid
scores, optional normalised top-k weights and routed scaling factor, leading dense layers, and the
Engram branch of DESIGN.md §2 (with or without the short causal conv) at the configured layers.

Weights live in an HF-style directory: config.json (DeepSeek field names + an "engram" block) and
model.safetensors. Engram rows are one tensor `engram.table.weight` [total_rows, row_dim] laid out
exactly like the v3 table's ROWS section (layer-major, then order, then head)."""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(positions, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.head_dim = H // self.n_heads
        self.q_proj = nn.Linear(H, H, bias=False)
        self.k_proj = nn.Linear(H, H, bias=False)
        self.v_proj = nn.Linear(H, H, bias=False)
        self.o_proj = nn.Linear(H, H, bias=False)
        self.theta = cfg.get("rope_theta", 10000.0)

    def forward(self, x, positions, cache=None):
        B, T, H = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        cos, sin = rope_cos_sin(positions, self.head_dim, self.theta)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        S = k.shape[2]
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if T > 1:
            mask = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)
            att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H))


class SwiGLU(nn.Module):
    def __init__(self, H, inter):
        super().__init__()
        self.gate_proj = nn.Linear(H, inter, bias=False)
        self.up_proj = nn.Linear(H, inter, bias=False)
        self.down_proj = nn.Linear(inter, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.n_experts = cfg["n_routed_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.scoring = cfg.get("scoring_func", "softmax")
        self.norm_topk = cfg.get("norm_topk_prob", False)
        self.scale = cfg.get("routed_scaling_factor", 1.0)
        self.gate = nn.Linear(H, self.n_experts, bias=False)
        self.experts = nn.ModuleList([SwiGLU(H, cfg["moe_intermediate_size"]) for _ in range(self.n_experts)])
        ns = cfg.get("n_shared_experts", 0)
        self.shared_experts = SwiGLU(H, cfg["moe_intermediate_size"] * ns) if ns else None
        self.aux_loss = None

    def forward(self, x):
        B, T, H = x.shape
        flat = x.reshape(-1, H)
        logits = self.gate(flat)
        scores = logits.softmax(-1) if self.scoring == "softmax" else logits.sigmoid()
        w, idx = scores.topk(self.top_k, dim=-1)
        if self.norm_topk:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        w = w * self.scale
        out = torch.zeros_like(flat)
        for e in range(self.n_experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            out.index_add_(0, tok, self.experts[e](flat[tok]) * w[tok, slot, None])
        if self.training:  # switch-style load balancing
            frac = F.one_hot(idx, self.n_experts).float().sum(1).mean(0)
            prob = logits.softmax(-1).mean(0)
            self.aux_loss = self.n_experts * (frac * prob).sum() / self.top_k
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view(B, T, H)


class Engram(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        e = cfg["engram"]
        mem = (e["max_ngram_size"] - 1) * e["n_embed_per_ngram"]
        eps = cfg["rms_norm_eps"]
        self.key_proj = nn.Linear(mem, H)
        self.value_proj = nn.Linear(mem, H)
        self.norm_key = RMSNorm(H, eps)
        self.norm_query = RMSNorm(H, eps)
        self.kernel = e.get("kernel_size", 4)
        self.dilation = e["max_ngram_size"]
        if self.kernel:
            self.conv_norm = RMSNorm(H, eps)
            self.conv = nn.Conv1d(H, H, self.kernel, groups=H, bias=False, dilation=self.dilation)
        self.hidden = H

    def forward(self, h, e, cache=None):
        k = self.key_proj(e)
        v = self.value_proj(e)
        g = (self.norm_key(k) * self.norm_query(h)).sum(-1) / math.sqrt(self.hidden)
        g = g.abs().clamp_min(1e-6).sqrt() * g.sign()
        vt = torch.sigmoid(g).unsqueeze(-1) * v
        if not self.kernel:
            return vt
        n = self.conv_norm(vt)  # [B, T, H]
        span = (self.kernel - 1) * self.dilation
        if cache is not None:
            past = cache.get("conv", n.new_zeros(n.shape[0], span, n.shape[2]))
            full = torch.cat([past, n], dim=1)
            cache["conv"] = full[:, -span:]
        else:
            full = F.pad(n, (0, 0, span, 0))
        y = self.conv(full.transpose(1, 2)).transpose(1, 2)
        return vt + F.silu(y)


class Layer(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        H = cfg["hidden_size"]
        eps = cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(H, eps)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.self_attn = Attention(cfg)
        dense = index < cfg.get("first_k_dense_replace", 0)
        self.mlp = SwiGLU(H, cfg["intermediate_size"]) if dense else MoE(cfg)
        self.engram = Engram(cfg) if index in cfg["engram"]["layer_ids"] else None

    def forward(self, h, positions, e=None, cache=None):
        if self.engram is not None and e is not None:
            h = h + self.engram(h, e, cache)
        h = h + self.self_attn(self.input_layernorm(h), positions, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class EngramMoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        H = cfg["hidden_size"]
        e = cfg["engram"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], H)
        self.layers = nn.ModuleList([Layer(cfg, i) for i in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        n_sub = len(e["layer_ids"]) * (e["max_ngram_size"] - 1) * e["n_head_per_ngram"]
        self.row_dim = e["n_embed_per_ngram"] // e["n_head_per_ngram"]
        self.engram = nn.Module()  # state_dict key "engram.table.weight": the v3 table's ROWS
        self.engram.table = nn.Embedding(n_sub * (1 << e["log2_buckets"]), self.row_dim)
        self.engram_layer_index = {l: i for i, l in enumerate(e["layer_ids"])}

    def hidden(self, ids, rows, positions, caches=None, use_engram=True, embeds=None):
        """ids [B, T]; rows int64 [B, T, n_engram_layers, per_layer] (global table rows);
        embeds: the token embeddings when the caller computes them (training)."""
        h = self.embed_tokens(ids) if embeds is None else embeds
        B, T = ids.shape
        for i, layer in enumerate(self.layers):
            e = None
            if use_engram and layer.engram is not None:
                li = self.engram_layer_index[i]
                e = self.engram.table(rows[:, :, li]).reshape(B, T, -1)
            h = layer(h, positions, e, caches[i] if caches is not None else None)
        return self.norm(h)

    def logits(self, h):
        return h @ self.embed_tokens.weight.t()


def tile_table(table, log2_from, log2_to):
    """The table [n_sub << log2_from, row_dim] with each sub-table's rows repeated to 2^log2_to
    buckets, as `engramctl build --tile-values` lays them out: bucket = hash & mask keeps the low
    bits, so every n-gram reads the row it read before."""
    if log2_to < log2_from:
        raise SystemExit(f"cannot tile a table of 2^{log2_from} buckets per sub-table down to 2^{log2_to}")
    n_sub = table.shape[0] >> log2_from
    return table.reshape(n_sub, 1 << log2_from, -1).repeat(1, 1 << (log2_to - log2_from), 1).reshape(
        n_sub << log2_to, -1)


def load_model(model_dir, dtype=torch.float32, log2_buckets=None):
    """Loads config.json + model.safetensors (our own small reader: Debian has no safetensors).
    log2_buckets: the table's buckets per sub-table when it has more than the model's (a table
    built with --tile-values); the model's table is tiled to match."""
    cfg = load_config(model_dir)
    tensors = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    e = cfg["engram"]
    if log2_buckets and log2_buckets != e["log2_buckets"]:
        name = "engram.table.weight"
        tensors[name] = tile_table(tensors[name], e["log2_buckets"], log2_buckets)
        e["log2_buckets"] = log2_buckets
    model = EngramMoE(cfg)
    sd = model.state_dict()
    missing = set(sd) - set(tensors)
    if missing:
        raise SystemExit(f"model.safetensors lacks {sorted(missing)[:5]}")
    for k in sd:
        sd[k].copy_(tensors[k].to(torch.float32))
    model.to(dtype)
    model.eval()
    return model


_ST_DTYPES = {"F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16), "BF16": (np.int16, torch.bfloat16),
              "I64": (np.int64, torch.int64), "I32": (np.int32, torch.int32)}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        npd, td = _ST_DTYPES[info["dtype"]]
        arr = np.frombuffer(data[a:b], dtype=npd).copy().reshape(info["shape"])
        t = torch.from_numpy(arr)
        out[name] = t.view(torch.bfloat16) if info["dtype"] == "BF16" else t
    return out


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            raw, dt = t.view(torch.int16).numpy().tobytes(), "BF16"
        elif t.dtype == torch.float32:
            raw, dt = t.numpy().tobytes(), "F32"
        else:
            raise ValueError(t.dtype)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)

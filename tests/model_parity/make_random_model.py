#!/usr/bin/python3
"""Writes a randomly initialised MoE+Engram model directory (config.json + model.safetensors in
f32) for parity tests of configurations the trained demo model does not use.
  make_random_model.py OUT VARIANT FINGERPRINT     VARIANT: v41 (no conv, sigmoid routing,
                                                   normalised top-k, scaling 2.5) | dense0"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/model"))
from engram_model import EngramMoE, write_safetensors  # noqa: E402

out, variant, fp = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = {
    "vocab_size": 129280, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "n_routed_experts": 6,
    "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "scoring_func": "softmax",
    "norm_topk_prob": False, "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "max_position_embeddings": 1024, "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 1,
    "engram": {"layer_ids": [0, 2], "max_ngram_size": 3, "n_embed_per_ngram": 32, "n_head_per_ngram": 2,
               "kernel_size": 4, "addressing": "native", "log2_buckets": 10, "seed": 0, "pad_token_id": 2,
               "tokenizer_fingerprint": fp},
}
if variant == "v41":
    cfg.update({"scoring_func": "sigmoid", "norm_topk_prob": True, "routed_scaling_factor": 2.5})
    cfg["engram"]["kernel_size"] = 0
elif variant == "dense0":
    cfg.update({"first_k_dense_replace": 0, "n_shared_experts": 0, "num_experts_per_tok": 3})
    cfg["engram"].update({"max_ngram_size": 4, "n_embed_per_ngram": 48, "n_head_per_ngram": 3, "layer_ids": [1]})
else:
    sys.exit("unknown variant " + variant)
torch.manual_seed(7)
m = EngramMoE(cfg)
with torch.no_grad():
    m.embed_tokens.weight.normal_(0, 0.05)
    m.engram.table.weight.normal_(0, 0.5)
    for n, p in m.named_parameters():
        if n.endswith("norm_key.weight") or n.endswith("norm_query.weight"):
            p.uniform_(0.5, 1.5)
os.makedirs(out, exist_ok=True)
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
write_safetensors(os.path.join(out, "model.safetensors"), {k: v.float() for k, v in m.state_dict().items()})

// The model directory's config.json (HF style, DeepSeek field names + an "engram" block), parsed
// and validated without torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engram::model {

struct ModelConfig {
  std::string dir;
  uint32_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, moe_intermediate_size = 0;
  uint32_t num_hidden_layers = 0, num_attention_heads = 0;
  uint32_t n_routed_experts = 0, n_shared_experts = 0, num_experts_per_tok = 0,
           first_k_dense_replace = 0;
  std::string scoring_func = "softmax";
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  uint32_t max_position_embeddings = 4096;
  bool tie_word_embeddings = true;
  int64_t bos_token_id = -1, eos_token_id = -1;
  // engram block
  std::vector<uint32_t> engram_layer_ids;
  uint32_t max_ngram_size = 0, n_embed_per_ngram = 0, n_head_per_ngram = 0, kernel_size = 0;
  std::string addressing = "native";
  uint32_t log2_buckets = 0;
  uint64_t engram_seed = 0;
  int64_t pad_token_id = -1;
  std::string tokenizer_fingerprint;  // hex, "" = not recorded

  uint32_t row_dim() const { return n_head_per_ngram ? n_embed_per_ngram / n_head_per_ngram : 0; }
  uint32_t memory_dim() const { return (max_ngram_size - 1) * n_embed_per_ngram; }
  bool is_moe_layer(uint32_t i) const { return i >= first_k_dense_replace && n_routed_experts > 0; }
  // Index of layer i among the Engram layers, or -1.
  int engram_index(uint32_t i) const {
    for (size_t k = 0; k < engram_layer_ids.size(); ++k)
      if (engram_layer_ids[k] == i) return static_cast<int>(k);
    return -1;
  }
};

// Reads and validates <dir>/config.json. Throws kCorrupt / kInvalidArgument naming the field.
ModelConfig LoadModelConfig(const std::string& dir);

}  // namespace engram::model

// config.json parsing for the model module.
#include "engram/model/model_config.h"

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"

namespace engram::model {

ModelConfig LoadModelConfig(const std::string& dir) {
  std::string path = dir + "/config.json";
  ENGRAM_CHECK(
      base::PathExists(path), Code::kInvalidArgument,
      "model directory " << dir
                         << " has no config.json; set [model] path (or --model) to a directory "
                            "with config.json, model.safetensors and tokenizer.json");
  base::Json j = base::Json::Parse(base::ReadFileToString(path, 16u << 20), path, 32);
  ModelConfig c;
  c.dir = dir;
  auto u = [&](const char* k, uint32_t* out, bool required) {
    const base::Json* v = j.Find(k);
    if (!v) {
      ENGRAM_CHECK(!required, Code::kCorrupt, path << ": \"" << k << "\" is missing");
      return;
    }
    auto x = v->as_uint64();
    ENGRAM_CHECK(x && *x < (1ull << 31), Code::kCorrupt,
                 path << ": \"" << k << "\" must be a non-negative integer");
    *out = static_cast<uint32_t>(*x);
  };
  u("vocab_size", &c.vocab_size, true);
  u("hidden_size", &c.hidden_size, true);
  u("intermediate_size", &c.intermediate_size, true);
  u("moe_intermediate_size", &c.moe_intermediate_size, false);
  u("num_hidden_layers", &c.num_hidden_layers, true);
  u("num_attention_heads", &c.num_attention_heads, true);
  u("n_routed_experts", &c.n_routed_experts, false);
  u("n_shared_experts", &c.n_shared_experts, false);
  u("num_experts_per_tok", &c.num_experts_per_tok, false);
  u("first_k_dense_replace", &c.first_k_dense_replace, false);
  u("max_position_embeddings", &c.max_position_embeddings, false);
  if (const base::Json* v = j.Find("num_key_value_heads");
      v && v->as_uint64() && *v->as_uint64() != c.num_attention_heads)
    ENGRAM_THROW(Code::kInvalidArgument,
                 path << ": num_key_value_heads != num_attention_heads (grouped-query "
                         "attention) is not supported by this runner");
  if (const base::Json* v = j.Find("scoring_func"); v && v->is_string())
    c.scoring_func = v->as_string();
  ENGRAM_CHECK(c.scoring_func == "softmax" || c.scoring_func == "sigmoid", Code::kInvalidArgument,
               path << ": scoring_func \"" << c.scoring_func << "\": use softmax or sigmoid");
  if (const base::Json* v = j.Find("topk_method");
      v && v->is_string() && v->as_string() != "greedy")
    ENGRAM_THROW(Code::kInvalidArgument, path << ": topk_method \"" << v->as_string()
                                              << "\" is not supported (greedy only)");
  if (const base::Json* v = j.Find("norm_topk_prob"); v && v->is_bool())
    c.norm_topk_prob = v->as_bool();
  if (const base::Json* v = j.Find("routed_scaling_factor"); v && v->is_number())
    c.routed_scaling_factor = v->as_double();
  if (const base::Json* v = j.Find("rms_norm_eps"); v && v->is_number())
    c.rms_norm_eps = v->as_double();
  if (const base::Json* v = j.Find("rope_theta"); v && v->is_number())
    c.rope_theta = v->as_double();
  if (const base::Json* v = j.Find("tie_word_embeddings"); v && v->is_bool())
    c.tie_word_embeddings = v->as_bool();
  if (const base::Json* v = j.Find("bos_token_id"); v && v->as_int64())
    c.bos_token_id = *v->as_int64();
  if (const base::Json* v = j.Find("eos_token_id"); v && v->as_int64())
    c.eos_token_id = *v->as_int64();
  ENGRAM_CHECK(c.num_attention_heads && c.hidden_size % c.num_attention_heads == 0 &&
                   (c.hidden_size / c.num_attention_heads) % 2 == 0,
               Code::kCorrupt, path << ": hidden_size must split into an even head dimension");
  ENGRAM_CHECK(c.n_routed_experts == 0 ||
                   (c.num_experts_per_tok >= 1 && c.num_experts_per_tok <= c.n_routed_experts),
               Code::kCorrupt, path << ": num_experts_per_tok must be in 1..n_routed_experts");
  const base::Json* e = j.Find("engram");
  if (e && e->is_object()) {
    auto eu = [&](const char* k, uint32_t* out) {
      const base::Json* v = e->Find(k);
      ENGRAM_CHECK(v && v->as_uint64(), Code::kCorrupt,
                   path << ": engram.\"" << k << "\" must be a non-negative integer");
      *out = static_cast<uint32_t>(*v->as_uint64());
    };
    const base::Json* ids = e->Find("layer_ids");
    ENGRAM_CHECK(ids && ids->is_array(), Code::kCorrupt,
                 path << ": engram.layer_ids must be an array");
    for (const auto& x : ids->items()) {
      auto v = x.as_uint64();
      ENGRAM_CHECK(v && *v < c.num_hidden_layers, Code::kCorrupt,
                   path << ": engram.layer_ids holds a layer the model lacks");
      c.engram_layer_ids.push_back(static_cast<uint32_t>(*v));
    }
    eu("max_ngram_size", &c.max_ngram_size);
    eu("n_embed_per_ngram", &c.n_embed_per_ngram);
    eu("n_head_per_ngram", &c.n_head_per_ngram);
    eu("kernel_size", &c.kernel_size);
    if (const base::Json* v = e->Find("log2_buckets"); v && v->as_uint64())
      c.log2_buckets = static_cast<uint32_t>(*v->as_uint64());
    if (const base::Json* v = e->Find("seed"); v && v->as_uint64()) c.engram_seed = *v->as_uint64();
    if (const base::Json* v = e->Find("pad_token_id"); v && v->as_int64())
      c.pad_token_id = *v->as_int64();
    if (const base::Json* v = e->Find("addressing"); v && v->is_string())
      c.addressing = v->as_string();
    if (const base::Json* v = e->Find("tokenizer_fingerprint"); v && v->is_string())
      c.tokenizer_fingerprint = v->as_string();
    ENGRAM_CHECK(c.max_ngram_size >= 2 && c.n_head_per_ngram >= 1 &&
                     c.n_embed_per_ngram % c.n_head_per_ngram == 0,
                 Code::kCorrupt,
                 path << ": engram: n_embed_per_ngram must be a multiple of n_head_per_ngram");
  }
  return c;
}

}  // namespace engram::model

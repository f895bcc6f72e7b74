// The model's weights from safetensors (one file or a sharded index): every tensor checked
// against the config's shapes, converted to the run's dtype, q/k/v and gate/up fused.
#include "engram/base/error.h"
#include "engram/model/torch_model.h"

namespace engram::model {

Tensor TorchTransformer::Get(format::Checkpoint& ck, const std::string& name,
                             std::vector<int64_t> shape) {
  std::string n = ck.Has(name) ? name : (ck.Has("model." + name) ? "model." + name : name);
  auto [file, t] = ck.Get(n);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::string want;
  for (size_t i = 0; i < shape.size(); ++i) want += (i ? "x" : "") + std::to_string(shape[i]);
  ENGRAM_CHECK(
      static_cast<int64_t>(t->numel()) == numel, Code::kCorrupt,
      "tensor " << n << " has " << t->numel() << " values, the config needs [" << want << "]");
  auto data = file->Data(*t);
  Tensor out;
  switch (t->dtype) {
    case format::StDType::kF32:
      out = torch::from_blob(const_cast<uint8_t*>(data.data()), shape, torch::kFloat32).clone();
      break;
    case format::StDType::kBF16:
      out = torch::from_blob(const_cast<uint8_t*>(data.data()), shape, torch::kBFloat16)
                .to(torch::kFloat32);
      break;
    case format::StDType::kF16:
      out = torch::from_blob(const_cast<uint8_t*>(data.data()), shape, torch::kFloat16)
                .to(torch::kFloat32);
      break;
    default:
      ENGRAM_THROW(Code::kInvalidArgument, "tensor " << n << " is " << format::StDTypeName(t->dtype)
                                                     << "; weights must be F32, BF16 or F16");
  }
  out = out.to(dtype_);
  weight_bytes_ += out.nbytes();
  return out;
}

SwiGLU TorchTransformer::LoadSwiGLU(format::Checkpoint& ck, const std::string& p, int64_t inter) {
  const int64_t H = cfg_.hidden_size;
  SwiGLU s;
  s.inter = inter;
  s.gate_up = torch::cat(
      {Get(ck, p + ".gate_proj.weight", {inter, H}), Get(ck, p + ".up_proj.weight", {inter, H})},
      0);
  s.down.w = Get(ck, p + ".down_proj.weight", {H, inter});
  return s;
}

void TorchTransformer::Load() {
  auto ck = format::Checkpoint::Open(cfg_.dir);
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, M = cfg_.memory_dim();
  embed_ = Get(*ck, "embed_tokens.weight", {V, H});
  final_norm_ = Get(*ck, "norm.weight", {H});
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : Get(*ck, "lm_head.weight", {V, H});
  for (uint32_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    std::string p = "layers." + std::to_string(i);
    LayerW L;
    L.in_norm = Get(*ck, p + ".input_layernorm.weight", {H});
    L.post_norm = Get(*ck, p + ".post_attention_layernorm.weight", {H});
    L.qkv = torch::cat({Get(*ck, p + ".self_attn.q_proj.weight", {H, H}),
                        Get(*ck, p + ".self_attn.k_proj.weight", {H, H}),
                        Get(*ck, p + ".self_attn.v_proj.weight", {H, H})},
                       0);
    L.o.w = Get(*ck, p + ".self_attn.o_proj.weight", {H, H});
    L.moe = cfg_.is_moe_layer(i);
    if (L.moe) {
      L.router = Get(*ck, p + ".mlp.gate.weight", {(int64_t)cfg_.n_routed_experts, H});
      for (uint32_t e = 0; e < cfg_.n_routed_experts; ++e)
        L.experts.push_back(
            LoadSwiGLU(*ck, p + ".mlp.experts." + std::to_string(e), cfg_.moe_intermediate_size));
      if (cfg_.n_shared_experts) {
        L.has_shared = true;
        L.shared = LoadSwiGLU(*ck, p + ".mlp.shared_experts",
                              (int64_t)cfg_.moe_intermediate_size * cfg_.n_shared_experts);
      }
    } else {
      L.dense = LoadSwiGLU(*ck, p + ".mlp", cfg_.intermediate_size);
    }
    L.engram = cfg_.engram_index(i);
    if (L.engram >= 0) {
      EngramBranch& g = L.eg;
      g.key.w = Get(*ck, p + ".engram.key_proj.weight", {H, M});
      g.key.b = Get(*ck, p + ".engram.key_proj.bias", {H});
      g.value.w = Get(*ck, p + ".engram.value_proj.weight", {H, M});
      g.value.b = Get(*ck, p + ".engram.value_proj.bias", {H});
      g.norm_key = Get(*ck, p + ".engram.norm_key.weight", {H});
      g.norm_query = Get(*ck, p + ".engram.norm_query.weight", {H});
      g.kernel = static_cast<int>(cfg_.kernel_size);
      g.dilation = static_cast<int>(cfg_.max_ngram_size);
      if (g.kernel) {
        g.conv_norm = Get(*ck, p + ".engram.conv_norm.weight", {H});
        g.conv_w = Get(*ck, p + ".engram.conv.weight", {H, 1, g.kernel}).reshape({H, g.kernel});
      }
    }
    layers_.push_back(std::move(L));
  }
}

}  // namespace engram::model

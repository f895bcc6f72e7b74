// The libtorch side of the model module, shared by its three translation units: the forward pass
// (transformer.cc), the weights (weights.cc) and row fitting for `append --fit` (row_fit.cc).
// Internal to libengram_model.so and included only by those files; everything else sees the
// torch-free interface in transformer.h.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engram/format/safetensors.h"
#include "engram/model/model_config.h"
#include "engram/model/transformer.h"

namespace engram::model {

using torch::Tensor;

// x @ w^T for x [..., in]: a matrix-vector product when x is one row (decode steps; BLAS gemm
// with a single row packs the whole weight first), a matrix product otherwise.
Tensor Lin(const Tensor& x, const Tensor& w);

struct Linear {
  Tensor w, b;  // [out, in], optional bias
  Tensor operator()(const Tensor& x) const { return b.defined() ? Lin(x, w) + b : Lin(x, w); }
};

struct SwiGLU {
  Tensor gate_up;  // [2I, H]: gate rows then up rows (one matmul)
  Linear down;
  int64_t inter = 0;
  Tensor operator()(const Tensor& x) const {
    Tensor gu = Lin(x, gate_up);
    return down(at::silu(gu.narrow(-1, 0, inter)) * gu.narrow(-1, inter, inter));
  }
};

struct EngramBranch {
  Linear key, value;
  Tensor norm_key, norm_query, conv_norm, conv_w;  // conv_w [H, K] (depthwise)
  int kernel = 0, dilation = 1;
  Tensor conv_state;  // [B, span, H] previous normalised values
};

struct LayerW {
  Tensor in_norm, post_norm;
  Tensor qkv;  // [3H, H]
  Linear o;
  bool moe = false;
  SwiGLU dense;
  Tensor router;  // [E, H]
  std::vector<SwiGLU> experts;
  SwiGLU shared;
  bool has_shared = false;
  int engram = -1;
  EngramBranch eg;
  Tensor k_cache, v_cache;  // [B, heads, S, d] (f32/bf16) or uint8 codes (fp8)
  Tensor k_scale, v_scale;  // fp8: [B, heads, S, 1]
};

// x / rms(x) * w, computed in f32 and returned in x's dtype.
Tensor RmsNorm(const Tensor& x, const Tensor& w, double eps);
// RoPE's rotation: [-x2, x1] of the two halves of the last dimension.
Tensor RotateHalf(const Tensor& x);

class TorchTransformer final : public Transformer {
 public:
  TorchTransformer(const ModelConfig& cfg, const TransformerOptions& o);
  void Reset() override;
  RowFitOutcome FitRows(const RowFitBatch& fb, const RowFitParams& prm,
                        const std::vector<float>& anchor, std::vector<float>* rows) override;
  bool CanEmit(uint32_t token) const override;
  uint64_t weight_bytes() const override { return weight_bytes_; }
  uint64_t cache_bytes() const override;
  void Forward(const StepInput& in, std::vector<float>* logits_out) override;
  void ForwardImpl(const StepInput& in, std::vector<float>* logits_out);

 private:
  RowFitOutcome FitRowsImpl(const RowFitBatch& fb, const RowFitParams& prm,
                            const std::vector<float>& anchor, std::vector<float>* rows);
  // Per sequence of `b`: whether every target's logit leads every other token's by `margin`
  // (lg: logits over the live vocabulary at the targets, want: their live ids, seq_of: their
  // sequences). The dead tokens' logits are 0.
  Tensor Fitted(const Tensor& lg, const Tensor& want, const Tensor& seq_of, int64_t b,
                const Tensor& margin) const;
  // After the fit, every target position's own rows (trainable rows that no other position of
  // an entry reads) are pulled back toward their old values as far as the entry stays fitted:
  // the fit stops when an entry's hardest target leads by the margin, and its other targets
  // usually lead by more. Positions are taken from each entry's last target back to its first,
  // each by bisection of one factor on its rows' change; entries are independent (no scaled row
  // is shared), so all are bisected in one batch. Every entry fitted before stays fitted.
  template <typename Logits>
  void Shrink(const RowFitBatch& fb, const RowFitParams& prm, int64_t BF, Tensor& P,
              const Tensor& P0, Logits& logits, const Tensor& tgt, RowFitOutcome* out);
  Tensor Engram(LayerW& L, const Tensor& h, const Tensor& e, const Tensor& valid);
  // sigmoid(signed sqrt of <norm(k), norm(h)> / sqrt(H)) * v: the Engram gate in torch ops.
  Tensor GatedValue(const EngramBranch& g, const Tensor& h, const Tensor& k, const Tensor& v);
  // y[t] = sum_j w[:, j] * full[t + j * dilation] for full = [B, span + T, H].
  static Tensor CausalConv(const EngramBranch& g, const Tensor& full, int64_t T);
  // The Engram branch over whole sequences (no conv state: the sequence start reads zeros),
  // differentiable in e.
  Tensor EngramTrain(LayerW& L, const Tensor& h, const Tensor& e);
  // Causal self-attention over whole sequences starting at position 0 (no cache).
  Tensor AttentionTrain(const LayerW& L, const Tensor& h, const Tensor& cos, const Tensor& sin,
                        const Tensor& neg);
  Tensor Moe(const LayerW& L, const Tensor& x);
  void StoreFp8(Tensor& codes, Tensor& scales, const Tensor& x, int64_t B, int64_t T);
  Tensor LoadFp8(const Tensor& codes, const Tensor& scales, int64_t B, int64_t S);
  Tensor Get(format::Checkpoint& ck, const std::string& name, std::vector<int64_t> shape);
  SwiGLU LoadSwiGLU(format::Checkpoint& ck, const std::string& p, int64_t inter);
  void Load();
  ModelConfig cfg_;
  TransformerOptions o_;
  torch::ScalarType dtype_ = torch::kFloat32, cache_dtype_ = torch::kFloat32;
  bool fp8_cache_ = false;
  int64_t heads_ = 0, head_dim_ = 0;
  Tensor embed_, final_norm_, lm_head_, cos_, sin_, e4m3_lut_, valid_cache_;
  Tensor live_head_, live_head_bf16_,
      live_of_;  // FitRows: output rows that are not all zero, token -> their index
  int64_t n_dead_ = 0;
  std::vector<LayerW> layers_;
  int64_t len_ = 0;
  uint64_t weight_bytes_ = 0;
};

}  // namespace engram::model

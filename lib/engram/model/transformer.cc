// The MoE+Engram decoder's forward pass in libtorch: a preallocated KV cache (f32, bf16 or
// emulated fp8), DeepSeek-style MoE routing and the Engram branch, plus the whole-sequence passes
// row fitting uses. Mirrors scripts/model/engram_model.py.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/cuda.h>

#include <array>
#include <cmath>
#include <cstring>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/model/engram_gate.h"
#include "engram/model/torch_model.h"

namespace engram::model {

// x @ w^T for x [..., in]: a matrix-vector product when x is one row (decode steps; BLAS gemm
// with a single row packs the whole weight first), a matrix product otherwise.
Tensor Lin(const Tensor& x, const Tensor& w) {
  if (x.numel() == w.size(1)) {
    auto shape = x.sizes().vec();
    shape.back() = w.size(0);
    return at::mv(w, x.reshape({-1})).view(shape);
  }
  return at::linear(x, w);
}

Tensor RmsNorm(const Tensor& x, const Tensor& w, double eps) {
  Tensor xf = x.to(torch::kFloat32);
  Tensor y = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (y * w.to(torch::kFloat32)).to(x.scalar_type());
}

Tensor RotateHalf(const Tensor& x) {
  int64_t h = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

TorchTransformer::TorchTransformer(const ModelConfig& cfg, const TransformerOptions& o)
    : cfg_(cfg), o_(o) {
  if (o.threads > 0) {
    at::set_num_threads(o.threads);
    // OpenBLAS (pthread build) keeps its own pool, sized to the cores, whose idle workers spin
    // in sched_yield beside libtorch's: give it the same count.
    using SetThreads = void (*)(int);
    for (const char* lib : {"libblas.so.3", "libopenblas.so.0"})
      if (void* h = ::dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
        if (auto fn = reinterpret_cast<SetThreads>(::dlsym(h, "openblas_set_num_threads")))
          fn(o.threads);
        ::dlclose(h);
      }
  }
  dtype_ = o.dtype == "bfloat16" || o.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  std::string kv = o.kv_cache_dtype;
  if (kv == "auto") kv = dtype_ == torch::kBFloat16 ? "bf16" : "f32";
  fp8_cache_ = kv == "fp8" || kv == "fp8_e4m3";
  cache_dtype_ = (kv == "bf16" || kv == "bfloat16") ? torch::kBFloat16 : torch::kFloat32;
  heads_ = cfg.num_attention_heads;
  head_dim_ = cfg.hidden_size / heads_;
  Load();
  // RoPE tables for every position.
  Tensor inv =
      1.0 / torch::pow(cfg.rope_theta, torch::arange(0, head_dim_, 2, torch::kFloat64) / head_dim_);
  Tensor pos = torch::arange(0, o.max_seq, torch::kFloat64);
  Tensor freqs = torch::outer(pos, inv).to(torch::kFloat32);
  Tensor emb = torch::cat({freqs, freqs}, -1);
  cos_ = emb.cos();
  sin_ = emb.sin();
  std::array<float, 256> lut;
  for (int q = 0; q < 256; ++q) lut[q] = base::E4M3ToFloat(static_cast<uint8_t>(q));
  e4m3_lut_ = torch::from_blob(lut.data(), {256}, torch::kFloat32).clone();
  Reset();
}

void TorchTransformer::Reset() {
  const int64_t B = o_.max_batch, S = o_.max_seq;
  for (auto& L : layers_) {
    auto opts = torch::TensorOptions().dtype(fp8_cache_ ? torch::kUInt8 : cache_dtype_);
    L.k_cache = torch::zeros({B, heads_, S, head_dim_}, opts);
    L.v_cache = torch::zeros({B, heads_, S, head_dim_}, opts);
    if (fp8_cache_) {
      L.k_scale = torch::zeros({B, heads_, S, 1}, torch::kFloat32);
      L.v_scale = torch::zeros({B, heads_, S, 1}, torch::kFloat32);
    }
    if (L.engram >= 0 && L.eg.kernel > 0)
      L.eg.conv_state =
          torch::zeros({B, (L.eg.kernel - 1) * L.eg.dilation, cfg_.hidden_size}, dtype_);
  }
  valid_cache_ = torch::zeros({B, S}, torch::kBool);
  len_ = 0;
}

bool TorchTransformer::CanEmit(uint32_t token) const {
  if (token >= static_cast<uint32_t>(lm_head_.size(0))) return false;
  return lm_head_[token].abs().max().item<float>() > 0.0f;
}

uint64_t TorchTransformer::cache_bytes() const {
  uint64_t n = 0;
  for (const auto& L : layers_) n += L.k_cache.nbytes() + L.v_cache.nbytes();
  return n;
}

void TorchTransformer::Forward(const StepInput& in, std::vector<float>* logits_out) {
  try {
    ForwardImpl(in, logits_out);
  } catch (const c10::Error& e) {
    ENGRAM_THROW(Code::kInternal,
                 "libtorch failed in the forward pass: " << e.what_without_backtrace());
  }
}

void TorchTransformer::ForwardImpl(const StepInput& in, std::vector<float>* logits_out) {
  torch::NoGradGuard ng;
  const int64_t B = in.batch, T = in.T, H = cfg_.hidden_size;
  ENGRAM_CHECK(B <= o_.max_batch, Code::kInvalidArgument,
               "batch " << B << " exceeds the runner's " << o_.max_batch);
  ENGRAM_CHECK(len_ + T <= o_.max_seq, Code::kInvalidArgument,
               "the sequence would reach " << len_ + T << " tokens, more than the " << o_.max_seq
                                           << " the model runs with; shorten the prompt or -n");
  Tensor tok = torch::from_blob(const_cast<int64_t*>(in.tokens), {B, T}, torch::kInt64);
  Tensor pos = torch::from_blob(const_cast<int64_t*>(in.positions), {B, T}, torch::kInt64);
  Tensor valid =
      torch::from_blob(const_cast<uint8_t*>(in.valid), {B, T}, torch::kUInt8).to(torch::kBool);
  valid_cache_.narrow(0, 0, B).narrow(1, len_, T).copy_(valid);
  // Keys visible to each query: valid slots up to the query's own step position.
  const int64_t S = len_ + T;
  Tensor key_ok = valid_cache_.narrow(0, 0, B).narrow(1, 0, S);        // [B, S]
  Tensor causal = torch::ones({T, S}, torch::kBool).tril(len_);        // [T, S]
  Tensor mask = key_ok.unsqueeze(1).logical_and(causal.unsqueeze(0));  // [B, T, S]
  // A padded query sees nothing valid; let it see itself so softmax stays finite.
  mask = mask.logical_or(torch::eye(T, S, torch::kBool).roll(len_, 1).unsqueeze(0));
  Tensor neg = torch::zeros({B, 1, T, S}, torch::kFloat32)
                   .masked_fill(mask.logical_not().unsqueeze(1), -INFINITY);
  Tensor cos = cos_.index({pos}).unsqueeze(1).to(dtype_);  // [B, 1, T, d]
  Tensor sin = sin_.index({pos}).unsqueeze(1).to(dtype_);

  Tensor h = embed_.index({tok}).to(dtype_);  // [B, T, H]
  for (size_t li = 0; li < layers_.size(); ++li) {
    LayerW& L = layers_[li];
    if (L.engram >= 0 && in.engram_rows) {
      const float* rows = in.engram_rows(static_cast<size_t>(L.engram));
      Tensor e = torch::from_blob(const_cast<float*>(rows), {B, T, (int64_t)cfg_.memory_dim()},
                                  torch::kFloat32)
                     .to(dtype_);
      h = h + Engram(L, h, e, valid);
    }
    Tensor x = RmsNorm(h, L.in_norm, cfg_.rms_norm_eps);
    Tensor qkv = Lin(x, L.qkv).view({B, T, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});
    Tensor q = qkv[0], k = qkv[1], v = qkv[2];  // [B, heads, T, d]
    q = q * cos + RotateHalf(q) * sin;
    k = k * cos + RotateHalf(k) * sin;
    Tensor keys, vals;
    if (fp8_cache_) {
      StoreFp8(L.k_cache, L.k_scale, k, B, T);
      StoreFp8(L.v_cache, L.v_scale, v, B, T);
      keys = LoadFp8(L.k_cache, L.k_scale, B, S);
      vals = LoadFp8(L.v_cache, L.v_scale, B, S);
    } else {
      L.k_cache.narrow(0, 0, B).narrow(2, len_, T).copy_(k);
      L.v_cache.narrow(0, 0, B).narrow(2, len_, T).copy_(v);
      keys = L.k_cache.narrow(0, 0, B).narrow(2, 0, S).to(dtype_);
      vals = L.v_cache.narrow(0, 0, B).narrow(2, 0, S).to(dtype_);
    }
    Tensor att = at::matmul(q, keys.transpose(-1, -2)).to(torch::kFloat32) /
                 std::sqrt(static_cast<double>(head_dim_));
    att = (att + neg).softmax(-1).to(dtype_);
    Tensor y = at::matmul(att, vals).transpose(1, 2).reshape({B, T, H});
    h = h + L.o(y);
    x = RmsNorm(h, L.post_norm, cfg_.rms_norm_eps);
    h = h + (L.moe ? Moe(L, x) : L.dense(x));
  }
  len_ += T;
  h = RmsNorm(h, final_norm_, cfg_.rms_norm_eps);
  if (in.targets) {
    Tensor tgt = torch::from_blob(const_cast<int64_t*>(in.targets), {B, T}, torch::kInt64);
    Tensor lg = Lin(h, lm_head_).to(torch::kFloat32);
    Tensor nll =
        (lg.logsumexp(-1) - lg.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1)) * (tgt >= 0);
    nll = nll.contiguous();
    logits_out->assign(nll.data_ptr<float>(), nll.data_ptr<float>() + nll.numel());
    return;
  }
  if (!in.all_logits) h = h.narrow(1, T - 1, 1);
  Tensor logits = Lin(h, lm_head_).to(torch::kFloat32).contiguous();
  logits_out->resize(static_cast<size_t>(logits.numel()));
  std::memcpy(logits_out->data(), logits.data_ptr<float>(), logits.numel() * sizeof(float));
}

Tensor TorchTransformer::Engram(LayerW& L, const Tensor& h, const Tensor& e, const Tensor& valid) {
  EngramBranch& g = L.eg;
  Tensor k = g.key(e), v = g.value(e);
  Tensor vt;  // [B, T, H]
  if (dtype_ == torch::kFloat32 && h.device().is_cpu()) {
    // f32 on CPU: the torch-free gate, also the reference for the CUDA kernel's parity test.
    Tensor kc = k.contiguous(), hc = h.contiguous(), vc = v.contiguous();
    Tensor wk = g.norm_key.to(torch::kFloat32).contiguous(),
           wq = g.norm_query.to(torch::kFloat32).contiguous();
    vt = torch::empty_like(vc);
    EngramGateCpu(kc.data_ptr<float>(), hc.data_ptr<float>(), wk.data_ptr<float>(),
                  wq.data_ptr<float>(), vc.data_ptr<float>(), vt.data_ptr<float>(),
                  static_cast<size_t>(kc.numel() / kc.size(-1)), static_cast<size_t>(kc.size(-1)),
                  static_cast<float>(cfg_.rms_norm_eps));
  } else {
    vt = GatedValue(g, h, k, v);
  }
  if (g.kernel == 0) return vt;
  // Padded positions contribute zeros to the causal conv, as the sequence start does.
  Tensor n = RmsNorm(vt, g.conv_norm, cfg_.rms_norm_eps) * valid.unsqueeze(-1).to(dtype_);
  const int64_t B = h.size(0), T = h.size(1), span = (g.kernel - 1) * g.dilation;
  Tensor full = torch::cat({g.conv_state.narrow(0, 0, B), n}, 1);  // [B, span + T, H]
  g.conv_state.narrow(0, 0, B).copy_(full.narrow(1, T, span));
  return vt + at::silu(CausalConv(g, full, T));
}

// sigmoid(signed sqrt of <norm(k), norm(h)> / sqrt(H)) * v: the Engram gate in torch ops.
Tensor TorchTransformer::GatedValue(const EngramBranch& g, const Tensor& h, const Tensor& k,
                                    const Tensor& v) {
  Tensor gate =
      (RmsNorm(k, g.norm_key, cfg_.rms_norm_eps) * RmsNorm(h, g.norm_query, cfg_.rms_norm_eps))
          .to(torch::kFloat32)
          .sum(-1) /
      std::sqrt(static_cast<double>(cfg_.hidden_size));
  gate = gate.abs().clamp_min(1e-6).sqrt() * gate.sign();
  return torch::sigmoid(gate).unsqueeze(-1).to(dtype_) * v;
}

// y[t] = sum_j w[:, j] * full[t + j * dilation] for full = [B, span + T, H].
Tensor TorchTransformer::CausalConv(const EngramBranch& g, const Tensor& full, int64_t T) {
  Tensor y = full.narrow(1, 0, T) * g.conv_w.select(1, 0);
  for (int j = 1; j < g.kernel; ++j)
    y = y + full.narrow(1, j * g.dilation, T) * g.conv_w.select(1, j);
  return y;
}

// The Engram branch over whole sequences (no conv state: the sequence start reads zeros),
// differentiable in e.
Tensor TorchTransformer::EngramTrain(LayerW& L, const Tensor& h, const Tensor& e) {
  const EngramBranch& g = L.eg;
  Tensor vt = GatedValue(g, h, g.key(e), g.value(e));
  if (g.kernel == 0) return vt;
  Tensor n = RmsNorm(vt, g.conv_norm, cfg_.rms_norm_eps);
  const int64_t B = h.size(0), T = h.size(1), span = (g.kernel - 1) * g.dilation;
  Tensor full = torch::cat({torch::zeros({B, span, h.size(2)}, n.options()), n}, 1);
  return vt + at::silu(CausalConv(g, full, T));
}

// Causal self-attention over whole sequences starting at position 0 (no cache).
Tensor TorchTransformer::AttentionTrain(const LayerW& L, const Tensor& h, const Tensor& cos,
                                        const Tensor& sin, const Tensor& neg) {
  const int64_t B = h.size(0), T = h.size(1), H = h.size(2);
  Tensor x = RmsNorm(h, L.in_norm, cfg_.rms_norm_eps);
  Tensor qkv = at::linear(x, L.qkv).view({B, T, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  Tensor q = qkv[0], k = qkv[1], v = qkv[2];
  q = q * cos + RotateHalf(q) * sin;
  k = k * cos + RotateHalf(k) * sin;
  Tensor att = at::matmul(q, k.transpose(-1, -2)).to(torch::kFloat32) /
               std::sqrt(static_cast<double>(head_dim_));
  att = (att + neg).softmax(-1).to(dtype_);
  Tensor y = at::matmul(att, v).transpose(1, 2).reshape({B, T, H});
  return h + L.o(y);
}

Tensor TorchTransformer::Moe(const LayerW& L, const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), N = B * T;
  Tensor flat = x.reshape({N, H});
  Tensor logits = Lin(flat, L.router).to(torch::kFloat32);
  Tensor scores = cfg_.scoring_func == "softmax" ? logits.softmax(-1) : logits.sigmoid();
  auto [w, idx] = scores.topk(cfg_.num_experts_per_tok, -1);
  if (cfg_.norm_topk_prob) w = w / (w.sum(-1, true) + 1e-20);
  if (cfg_.routed_scaling_factor != 1.0) w = w * cfg_.routed_scaling_factor;
  Tensor out = torch::zeros({N, H}, x.options());
  if (N == 1) {
    // Decode: run just the chosen experts, no gather/scatter.
    auto ia = idx.accessor<int64_t, 2>();
    for (int64_t s = 0; s < idx.size(1); ++s)
      out = out + L.experts[ia[0][s]](flat) * w.index({0, s}).to(x.scalar_type());
  } else {
    Tensor idx_cpu = idx.contiguous();
    for (size_t e = 0; e < L.experts.size(); ++e) {
      Tensor hit = (idx_cpu == static_cast<int64_t>(e)).nonzero();
      if (hit.size(0) == 0) continue;
      Tensor tok = hit.select(1, 0), slot = hit.select(1, 1);
      Tensor ye = L.experts[e](flat.index_select(0, tok)) *
                  w.index({tok, slot}).unsqueeze(-1).to(x.scalar_type());
      out.index_add_(0, tok, ye);
    }
  }
  if (L.has_shared) out = out + L.shared(flat);
  return out.view({B, T, H});
}

void TorchTransformer::StoreFp8(Tensor& codes, Tensor& scales, const Tensor& x, int64_t B,
                                int64_t T) {
  // Per (sequence, head, position) vector: scale = amax / 448, codes = e4m3(x / scale).
  Tensor xf = x.to(torch::kFloat32).contiguous();
  Tensor amax = xf.abs().amax(-1, true).clamp_min(1e-12);
  Tensor scale = amax / 448.0;
  Tensor q = (xf / scale).contiguous();
  Tensor c = torch::empty(q.sizes(), torch::kUInt8);
  const float* qp = q.data_ptr<float>();
  uint8_t* cp = c.data_ptr<uint8_t>();
  for (int64_t i = 0; i < q.numel(); ++i) cp[i] = base::FloatToE4M3(qp[i]);
  codes.narrow(0, 0, B).narrow(2, len_, T).copy_(c);
  scales.narrow(0, 0, B).narrow(2, len_, T).copy_(scale);
}

Tensor TorchTransformer::LoadFp8(const Tensor& codes, const Tensor& scales, int64_t B, int64_t S) {
  Tensor c = codes.narrow(0, 0, B).narrow(2, 0, S).to(torch::kInt64);
  return (e4m3_lut_.index({c}) * scales.narrow(0, 0, B).narrow(2, 0, S)).to(dtype_);
}

bool TorchHasCuda() { return torch::cuda::is_available(); }

std::unique_ptr<Transformer> Transformer::Load(const ModelConfig& cfg,
                                               const TransformerOptions& opts) {
  try {
    return std::make_unique<TorchTransformer>(cfg, opts);
  } catch (const c10::Error& e) {
    ENGRAM_THROW(Code::kInternal,
                 "libtorch failed while loading " << cfg.dir << ": " << e.what_without_backtrace());
  }
}

}  // namespace engram::model

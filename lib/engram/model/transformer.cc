// The MoE+Engram decoder in libtorch: weights from safetensors, a preallocated KV cache,
// DeepSeek-style MoE routing and the Engram branch. Mirrors scripts/model/engram_model.py.
#include "engram/model/transformer.h"

#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/format/safetensors.h"
#include "engram/model/engram_gate.h"

namespace engram::model {

namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

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

Tensor RmsNorm(const Tensor& x, const Tensor& w, double eps) {
  Tensor xf = x.to(torch::kFloat32);
  Tensor y = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (y * w.to(torch::kFloat32)).to(x.scalar_type());
}

Tensor RotateHalf(const Tensor& x) {
  int64_t h = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

class TorchTransformer final : public Transformer {
 public:
  TorchTransformer(const ModelConfig& cfg, const TransformerOptions& o) : cfg_(cfg), o_(o) {
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
    Tensor inv = 1.0 / torch::pow(cfg.rope_theta,
                                  torch::arange(0, head_dim_, 2, torch::kFloat64) / head_dim_);
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

  void Reset() override {
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

  RowFitOutcome FitRows(const RowFitBatch& fb, const RowFitParams& prm,
                        const std::vector<float>& anchor, std::vector<float>* rows) override {
    const int64_t B = fb.batch, T = fb.T, D = fb.row_dim,
                  R = static_cast<int64_t>(rows->size()) / D;
    // Every step allocates and frees the same [targets, vocab] tensors; keep them in the heap
    // rather than mmap/munmap each time (page faults cost more than the step's arithmetic).
    ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    ENGRAM_CHECK(
        T <= o_.max_seq, Code::kInvalidArgument,
        "a fit sequence has " << T << " tokens, more than the model's context of " << o_.max_seq);
    auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    Tensor tok = torch::from_blob(const_cast<int64_t*>(fb.tokens.data()), {B, T}, i64).clone();
    Tensor tgt = torch::from_blob(const_cast<int64_t*>(fb.targets.data()), {B, T}, i64).clone();
    // Target positions of the entries, flattened (preservation contexts mark theirs with 0).
    const int64_t BF = B - fb.preserve;  // entries; the rest are preservation contexts
    Tensor where = (tgt.narrow(0, 0, BF) >= 0).reshape({-1}).nonzero().squeeze(1);
    if (!live_head_.defined()) {
      torch::NoGradGuard ng;
      Tensor live = lm_head_.abs().amax(1).gt(0).nonzero().squeeze(1);
      live_head_ = lm_head_.index_select(0, live).contiguous();
      live_of_ = torch::full({lm_head_.size(0)}, -1, i64)
                     .index_put_({live}, torch::arange(live.size(0), i64));
      n_dead_ = lm_head_.size(0) - live.size(0);
    }
    if (prm.bf16_head && !live_head_bf16_.defined()) {
      torch::NoGradGuard ng;
      live_head_bf16_ = live_head_.to(torch::kBFloat16);
    }
    {
      Tensor want =
          live_of_.index_select(0, tgt.narrow(0, 0, BF).reshape({-1}).index_select(0, where));
      ENGRAM_CHECK(want.numel() == 0 || want.min().item<int64_t>() >= 0, Code::kInvalidArgument,
                   "a fit target is a token the model can never emit (all-zero output row)");
    }
    const int64_t per = static_cast<int64_t>(cfg_.memory_dim()) / D;
    std::vector<Tensor> frozen, index, use;  // per Engram layer: [B, T * per, ...]
    for (size_t k = 0; k < fb.frozen.size(); ++k) {
      frozen.push_back(
          torch::from_blob(const_cast<float*>(fb.frozen[k].data()), {B, T * per, D}, f32).clone());
      Tensor ix =
          torch::from_blob(const_cast<int64_t*>(fb.train_index[k].data()), {B, T * per}, i64)
              .clone();
      use.push_back((ix >= 0).unsqueeze(2));
      index.push_back(ix.clamp_min(0));
    }
    Tensor P = torch::from_blob(rows->data(), {R, D}, f32).clone().requires_grad_(true);
    Tensor P0 = torch::from_blob(const_cast<float*>(anchor.data()), {R, D}, f32).clone();
    // Adam without momentum (beta1 = 0): momentum carries the rows on past the point where an
    // entry is fitted, and every unit of change is felt by the other n-grams sharing the rows
    // (on the bench facts: held-out perplexity +0.8% instead of +1.2%).
    torch::optim::Adam opt(std::vector<Tensor>{P},
                           torch::optim::AdamOptions(prm.lr).betas({0.0, 0.999}));
    // Positions per sequence are 0..T-1 (right padding); causal mask shared by the batch.
    Tensor neg =
        torch::zeros({T, T}, f32)
            .masked_fill(torch::ones({T, T}, torch::kBool).tril().logical_not(), -INFINITY);
    Tensor cos = cos_.narrow(0, 0, T).to(dtype_), sin = sin_.narrow(0, 0, T).to(dtype_);

    // The layers below the first Engram layer read no row: their output is the same at every
    // step, so it is computed once, for every sequence (B x T x hidden floats).
    size_t first_engram = 0;
    while (first_engram < layers_.size() && layers_[first_engram].engram < 0) ++first_engram;
    auto plain_layer = [&](LayerW& L, Tensor h) {
      h = AttentionTrain(L, h, cos, sin, neg);
      Tensor x = RmsNorm(h, L.post_norm, cfg_.rms_norm_eps);
      return h + (L.moe ? Moe(L, x) : L.dense(x));
    };
    Tensor below;
    {
      torch::NoGradGuard ng;
      below = embed_.index({tok});  // [B, T, H]
      for (size_t i = 0; i < first_engram; ++i) below = plain_layer(layers_[i], below);
    }
    // Logits of the sequences `sel` at their flattened positions `at`, with Engram rows `rows`
    // in place of the trainable ones: over the live vocabulary only, since a token whose output
    // row is all zero has logit exactly 0; `full` adds the dead ones as one term log(n_dead)
    // (exact in every softmax).
    auto logits = [&](const Tensor& sel, const Tensor& at, const Tensor& rows) {
      const int64_t b = sel.size(0);
      Tensor h = below.index_select(0, sel);
      for (size_t i = first_engram; i < layers_.size(); ++i) {
        LayerW& L = layers_[i];
        if (L.engram >= 0) {
          size_t k = static_cast<size_t>(L.engram);
          Tensor ix = index[k].index_select(0, sel).reshape({-1});
          Tensor e = torch::where(use[k].index_select(0, sel),
                                  rows.index_select(0, ix).view({b, T * per, D}),
                                  frozen[k].index_select(0, sel))
                         .view({b, T, per * D})
                         .to(dtype_);
          h = h + EngramTrain(L, h, e);
        }
        h = plain_layer(L, h);
      }
      h = RmsNorm(h, final_norm_, cfg_.rms_norm_eps);
      Tensor hs = h.reshape({b * T, -1}).index_select(0, at);
      // In bf16 the head's products (most of a step's arithmetic: targets x live vocabulary x
      // hidden, forward and backward) run on the CPU's bf16 dot-product units.
      Tensor lg = (prm.bf16_head ? at::linear(hs.to(torch::kBFloat16), live_head_bf16_)
                                 : at::linear(hs, live_head_))
                      .to(torch::kFloat32);  // [N, L]
      Tensor full =
          n_dead_
              ? torch::cat({lg, torch::full({lg.size(0), 1}, std::log(static_cast<double>(n_dead_)),
                                            lg.options())},
                           1)
              : lg;
      return std::make_pair(lg, full);
    };
    // Preservation contexts (each marks one position, its last): the log-distributions there
    // with `rows`, for contexts `ctx` (0-based among them); under the unedited rows once, in
    // chunks of kKeepChunk; and KL(unedited || now) per context.
    constexpr int64_t kKeepChunk = 256;
    const Tensor keep_seqs = torch::arange(BF, B, i64);
    auto keep_log_probs = [&](const Tensor& ctx, const Tensor& rows) {
      Tensor sel = keep_seqs.index_select(0, ctx);
      Tensor at = (tgt.index_select(0, sel) >= 0).reshape({-1}).nonzero().squeeze(1);
      return torch::log_softmax(logits(sel, at, rows).second, 1);
    };
    Tensor keep_logp;
    if (fb.preserve > 0) {
      torch::NoGradGuard ng;
      std::vector<Tensor> chunks;
      for (int64_t c0 = 0; c0 < fb.preserve; c0 += kKeepChunk)
        chunks.push_back(keep_log_probs(
            torch::arange(c0, std::min<int64_t>(fb.preserve, c0 + kKeepChunk), i64), P0));
      keep_logp = torch::cat(chunks);
    }
    auto keep_kl = [&](const Tensor& ctx) {
      Tensor lp0 = keep_logp.index_select(0, ctx);
      return (lp0.exp() * (lp0 - keep_log_probs(ctx, P))).sum(1);
    };
    // One forward over the sequences `sel`: each target's negative log-likelihood, which of
    // `sel` are fitted (every target leads by the margin), and each target's index in `sel`.
    struct Pass {
      Tensor nll, seq_ok, seq_of;
    };
    auto forward = [&](const Tensor& sel) {
      const int64_t b = sel.size(0);
      Tensor tg = tgt.index_select(0, sel);
      Tensor at = (tg >= 0).reshape({-1}).nonzero().squeeze(1);
      Tensor want = live_of_.index_select(0, tg.reshape({-1}).index_select(0, at));
      Pass p;
      p.seq_of = torch::div(at, T, "floor");
      auto [lg, full] = logits(sel, at, P);
      p.nll = full.logsumexp(1) - lg.gather(1, want.unsqueeze(1)).squeeze(1);  // [N]
      torch::NoGradGuard ng;
      p.seq_ok = Fitted(lg.detach(), want, p.seq_of, b, prm.margin);
      return p;
    };

    // Only the sequences not yet fitted take part in a step; every kCheckEvery steps (and when
    // they are all fitted) every sequence is checked again, since shared rows move.
    constexpr int kCheckEvery = 8;
    RowFitOutcome out;
    out.fitted.assign(static_cast<size_t>(BF), 0);
    const Tensor all = torch::arange(BF, i64);
    int64_t keep_next = 0;  // the next preservation context to take
    Tensor active;
    int n_ok = 0;
    for (int step = 0, since_check = 0;;) {
      if (!active.defined() || since_check >= kCheckEvery) {
        torch::NoGradGuard ng;
        Pass p = forward(all);
        auto sa = p.seq_ok.accessor<bool, 1>();
        n_ok = 0;
        for (int64_t b = 0; b < BF; ++b) n_ok += out.fitted[b] = sa[b];
        if (n_ok == BF || step >= prm.steps) {
          out.steps = step;
          break;
        }
        active = p.seq_ok.logical_not().nonzero().squeeze(1);
        since_check = 0;
      }
      Pass p = forward(active);
      const bool all_ok = p.seq_ok.all().item<bool>();
      if (all_ok && since_check > 0) {
        active = Tensor();  // check everything now
        continue;
      }
      // Mean cross-entropy per unfitted sequence, summed; plus the L2 pull toward the anchor.
      // (Right after a check every active sequence counts, so each check is followed by a step
      // even where a smaller batch rounds differently.)
      Tensor cnt =
          torch::zeros({active.size(0)}, f32).index_add_(0, p.seq_of, torch::ones_like(p.nll));
      Tensor pick = all_ok ? torch::ones_like(p.seq_ok) : p.seq_ok.logical_not();
      Tensor w = pick.to(torch::kFloat32) / cnt.clamp_min(1);
      Tensor loss = (p.nll * w.index_select(0, p.seq_of)).sum() + prm.l2 * (P - P0).pow(2).sum();
      if (fb.preserve > 0 && prm.keep > 0) {
        // KL at the next keep_batch preservation contexts, in turn.
        const int64_t n = std::min<int64_t>(prm.keep_batch, fb.preserve);
        Tensor pick_k = (torch::arange(n, i64) + keep_next) % fb.preserve;
        keep_next = (keep_next + n) % fb.preserve;
        loss = loss + prm.keep * keep_kl(pick_k).mean();
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
      ++step;
      ++since_check;
      out.loss = loss.item<double>();
      if (prm.progress && !prm.progress(step, n_ok, out.loss)) {
        out.steps = step;
        break;
      }
      if (step >= prm.steps) active = Tensor();  // final check
    }
    if (prm.shrink && BF > 0) Shrink(fb, prm, BF, P, P0, logits, tgt, &out);
    if (fb.preserve > 0) {
      // How far the preserved contexts moved, over all of them (reported; a test compares it).
      torch::NoGradGuard ng;
      double kl = 0;
      for (int64_t c0 = 0; c0 < fb.preserve; c0 += kKeepChunk)
        kl += keep_kl(torch::arange(c0, std::min<int64_t>(fb.preserve, c0 + kKeepChunk), i64))
                  .sum()
                  .item<double>();
      out.keep_kl = kl / static_cast<double>(fb.preserve);
    }
    {
      torch::NoGradGuard ng;
      Tensor fin = P.detach().contiguous();
      std::memcpy(rows->data(), fin.data_ptr<float>(), fin.numel() * sizeof(float));
    }
    return out;
  }

  // Per sequence of `b`: whether every target's logit leads every other token's by `margin`
  // (lg: logits over the live vocabulary at the targets, want: their live ids, seq_of: their
  // sequences). The dead tokens' logits are 0.
  Tensor Fitted(const Tensor& lg, const Tensor& want, const Tensor& seq_of, int64_t b,
                double margin) const {
    Tensor tl = lg.gather(1, want.unsqueeze(1)).squeeze(1);
    Tensor other = lg.scatter(1, want.unsqueeze(1), -INFINITY).amax(1);
    if (n_dead_) other = other.clamp_min(0.0);
    Tensor bad = torch::zeros({b}, torch::kInt64)
                     .index_add_(0, seq_of, ((tl - other) < margin).to(torch::kInt64));
    return bad == 0;
  }

  // After the fit, every target position's own rows (trainable rows that no other position of
  // an entry reads) are pulled back toward their old values as far as the entry stays fitted:
  // the fit stops when an entry's hardest target leads by the margin, and its other targets
  // usually lead by more. Positions are taken from each entry's last target back to its first,
  // each by bisection of one factor on its rows' change; entries are independent (no scaled row
  // is shared), so all are bisected in one batch. Every entry fitted before stays fitted.
  template <typename Logits>
  void Shrink(const RowFitBatch& fb, const RowFitParams& prm, int64_t BF, Tensor& P,
              const Tensor& P0, Logits& logits, const Tensor& tgt, RowFitOutcome* out) {
    torch::NoGradGuard ng;
    const int64_t T = fb.T, R = P.size(0);
    const int64_t per = static_cast<int64_t>(cfg_.memory_dim()) / fb.row_dim;
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    // Owner of each row: the entry position (b * T + t) that alone reads it; -1 shared.
    std::vector<int64_t> owner(static_cast<size_t>(R), -2);
    for (const auto& ix : fb.train_index)
      for (int64_t b = 0; b < BF; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t c = 0; c < per; ++c) {
            int64_t r = ix[static_cast<size_t>((b * T + t) * per + c)];
            if (r < 0) continue;
            int64_t g = fb.targets[static_cast<size_t>(b * T + t)] >= 0 ? b * T + t : -1;
            int64_t& o = owner[static_cast<size_t>(r)];
            o = (o == -2 || o == g) ? g : -1;
          }
    // Groups by rank from each entry's last target position.
    std::vector<std::vector<int64_t>> group_rows(static_cast<size_t>(BF * T));
    for (int64_t r = 0; r < R; ++r)
      if (owner[static_cast<size_t>(r)] >= 0)
        group_rows[static_cast<size_t>(owner[r])].push_back(r);
    std::vector<std::vector<int64_t>> by_rank;  // group ids
    for (int64_t b = 0; b < BF; ++b) {
      size_t rank = 0;
      for (int64_t t = T - 1; t >= 0; --t) {
        if (fb.targets[static_cast<size_t>(b * T + t)] < 0) continue;
        if (!group_rows[static_cast<size_t>(b * T + t)].empty()) {
          if (by_rank.size() <= rank) by_rank.resize(rank + 1);
          by_rank[rank].push_back(b * T + t);
        }
        ++rank;
      }
    }
    const Tensor all = torch::arange(BF, i64);
    Tensor tg = tgt.narrow(0, 0, BF);
    Tensor at = (tg >= 0).reshape({-1}).nonzero().squeeze(1);
    Tensor want = live_of_.index_select(0, tg.reshape({-1}).index_select(0, at));
    Tensor seq_of = torch::div(at, T, "floor");
    Tensor delta = P.detach() - P0;
    auto ok_with = [&](const Tensor& alpha) {
      Tensor lg = logits(all, at, P0 + alpha.unsqueeze(1) * delta).first;
      return Fitted(lg, want, seq_of, BF, prm.margin).contiguous();
    };
    std::vector<float> alpha(static_cast<size_t>(R), 1.0f);
    auto alpha_t = [&] { return torch::from_blob(alpha.data(), {R}, torch::kFloat32).clone(); };
    auto set = [&](int64_t g, float a) {
      for (int64_t r : group_rows[static_cast<size_t>(g)]) alpha[static_cast<size_t>(r)] = a;
    };
    for (const auto& groups : by_rank) {
      std::vector<float> lo(groups.size(), 0.0f), hi(groups.size(), 1.0f);
      for (int it = 0; it < prm.shrink_steps; ++it) {
        for (size_t i = 0; i < groups.size(); ++i) set(groups[i], 0.5f * (lo[i] + hi[i]));
        Tensor ok = ok_with(alpha_t());
        auto oa = ok.accessor<bool, 1>();
        for (size_t i = 0; i < groups.size(); ++i)
          (oa[groups[i] / T] ? hi[i] : lo[i]) = 0.5f * (lo[i] + hi[i]);
      }
      for (size_t i = 0; i < groups.size(); ++i) set(groups[i], hi[i]);
    }
    // Keep every entry the fit had fitted; where one slipped (the bisection's last accepted
    // factors are each checked with the other groups of their rank mid-way), undo its groups.
    Tensor ok = ok_with(alpha_t());
    auto oa = ok.accessor<bool, 1>();
    bool undone = false;
    for (int64_t b = 0; b < BF; ++b)
      if (out->fitted[static_cast<size_t>(b)] && !oa[b]) {
        for (int64_t t = 0; t < T; ++t) set(b * T + t, 1.0f);
        undone = true;
      }
    if (undone) {
      ok = ok_with(alpha_t());
      oa = ok.accessor<bool, 1>();
      for (int64_t b = 0; b < BF; ++b)
        if (out->fitted[static_cast<size_t>(b)] && !oa[b])
          std::fill(alpha.begin(), alpha.end(), 1.0f);
    }
    P.detach().copy_(P0 + alpha_t().unsqueeze(1) * delta);
    double kept = 0;
    for (float a : alpha) kept += a;
    out->shrink = R > 0 ? kept / static_cast<double>(R) : 1.0;
  }

  bool CanEmit(uint32_t token) const override {
    if (token >= static_cast<uint32_t>(lm_head_.size(0))) return false;
    return lm_head_[token].abs().max().item<float>() > 0.0f;
  }

  uint64_t weight_bytes() const override { return weight_bytes_; }
  uint64_t cache_bytes() const override {
    uint64_t n = 0;
    for (const auto& L : layers_) n += L.k_cache.nbytes() + L.v_cache.nbytes();
    return n;
  }

  void Forward(const StepInput& in, std::vector<float>* logits_out) override {
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
      Tensor nll = (lg.logsumexp(-1) - lg.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1)) *
                   (tgt >= 0);
      nll = nll.contiguous();
      logits_out->assign(nll.data_ptr<float>(), nll.data_ptr<float>() + nll.numel());
      return;
    }
    if (!in.all_logits) h = h.narrow(1, T - 1, 1);
    Tensor logits = Lin(h, lm_head_).to(torch::kFloat32).contiguous();
    logits_out->resize(static_cast<size_t>(logits.numel()));
    std::memcpy(logits_out->data(), logits.data_ptr<float>(), logits.numel() * sizeof(float));
  }

 private:
  Tensor Engram(LayerW& L, const Tensor& h, const Tensor& e, const Tensor& valid) {
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
  Tensor GatedValue(const EngramBranch& g, const Tensor& h, const Tensor& k, const Tensor& v) {
    Tensor gate =
        (RmsNorm(k, g.norm_key, cfg_.rms_norm_eps) * RmsNorm(h, g.norm_query, cfg_.rms_norm_eps))
            .to(torch::kFloat32)
            .sum(-1) /
        std::sqrt(static_cast<double>(cfg_.hidden_size));
    gate = gate.abs().clamp_min(1e-6).sqrt() * gate.sign();
    return torch::sigmoid(gate).unsqueeze(-1).to(dtype_) * v;
  }

  // y[t] = sum_j w[:, j] * full[t + j * dilation] for full = [B, span + T, H].
  static Tensor CausalConv(const EngramBranch& g, const Tensor& full, int64_t T) {
    Tensor y = full.narrow(1, 0, T) * g.conv_w.select(1, 0);
    for (int j = 1; j < g.kernel; ++j)
      y = y + full.narrow(1, j * g.dilation, T) * g.conv_w.select(1, j);
    return y;
  }

  // The Engram branch over whole sequences (no conv state: the sequence start reads zeros),
  // differentiable in e.
  Tensor EngramTrain(LayerW& L, const Tensor& h, const Tensor& e) {
    const EngramBranch& g = L.eg;
    Tensor vt = GatedValue(g, h, g.key(e), g.value(e));
    if (g.kernel == 0) return vt;
    Tensor n = RmsNorm(vt, g.conv_norm, cfg_.rms_norm_eps);
    const int64_t B = h.size(0), T = h.size(1), span = (g.kernel - 1) * g.dilation;
    Tensor full = torch::cat({torch::zeros({B, span, h.size(2)}, n.options()), n}, 1);
    return vt + at::silu(CausalConv(g, full, T));
  }

  // Causal self-attention over whole sequences starting at position 0 (no cache).
  Tensor AttentionTrain(const LayerW& L, const Tensor& h, const Tensor& cos, const Tensor& sin,
                        const Tensor& neg) {
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

  Tensor Moe(const LayerW& L, const Tensor& x) {
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

  void StoreFp8(Tensor& codes, Tensor& scales, const Tensor& x, int64_t B, int64_t T) {
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

  Tensor LoadFp8(const Tensor& codes, const Tensor& scales, int64_t B, int64_t S) {
    Tensor c = codes.narrow(0, 0, B).narrow(2, 0, S).to(torch::kInt64);
    return (e4m3_lut_.index({c}) * scales.narrow(0, 0, B).narrow(2, 0, S)).to(dtype_);
  }

  Tensor Get(format::Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
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
        ENGRAM_THROW(Code::kInvalidArgument, "tensor " << n << " is "
                                                       << format::StDTypeName(t->dtype)
                                                       << "; weights must be F32, BF16 or F16");
    }
    out = out.to(dtype_);
    weight_bytes_ += out.nbytes();
    return out;
  }

  SwiGLU LoadSwiGLU(format::Checkpoint& ck, const std::string& p, int64_t inter) {
    const int64_t H = cfg_.hidden_size;
    SwiGLU s;
    s.inter = inter;
    s.gate_up = torch::cat(
        {Get(ck, p + ".gate_proj.weight", {inter, H}), Get(ck, p + ".up_proj.weight", {inter, H})},
        0);
    s.down.w = Get(ck, p + ".down_proj.weight", {H, inter});
    return s;
  }

  void Load() {
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

}  // namespace

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

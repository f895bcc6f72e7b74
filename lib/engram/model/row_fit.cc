// `append --fit`'s optimiser: the trainable Engram rows of a batch of sequences fitted through
// the frozen model (whole-sequence passes, no KV cache), the preservation KL, and --shrink.
#include <malloc.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <cstring>

#include "engram/base/error.h"
#include "engram/model/torch_model.h"

namespace engram::model {

RowFitOutcome TorchTransformer::FitRows(const RowFitBatch& fb, const RowFitParams& prm,
                                        const std::vector<float>& anchor,
                                        std::vector<float>* rows) {
  try {
    return FitRowsImpl(fb, prm, anchor, rows);
  } catch (const c10::Error& e) {
    // libtorch's errors carry a C++ backtrace; the user gets the operation and the reason.
    ENGRAM_THROW(Code::kInternal,
                 "libtorch failed while fitting rows: " << e.what_without_backtrace());
  }
}

RowFitOutcome TorchTransformer::FitRowsImpl(const RowFitBatch& fb, const RowFitParams& prm,
                                            const std::vector<float>& anchor,
                                            std::vector<float>* rows) {
  const int64_t B = fb.batch, T = fb.T, D = fb.row_dim, R = static_cast<int64_t>(rows->size()) / D;
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
        torch::from_blob(const_cast<int64_t*>(fb.train_index[k].data()), {B, T * per}, i64).clone();
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
  Tensor neg = torch::zeros({T, T}, f32)
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
  // Each sequence's margin: its own (a ledger fact's stored margin) or the round's.
  std::vector<float> margins(static_cast<size_t>(BF), static_cast<float>(prm.margin));
  for (int64_t b = 0; b < BF && static_cast<size_t>(b) < fb.margins.size(); ++b)
    if (fb.margins[b] > 0) margins[b] = fb.margins[b];
  const Tensor seq_margin = torch::from_blob(margins.data(), {BF}, f32).clone();
  // One forward over the sequences `sel`: each target's hinge loss, which of `sel` are fitted
  // (every target leads every other token by its sequence's margin), and each target's index in
  // `sel`. The hinge is softplus(m + 0.5 - (z_t - LSE of the other logits)): it asks for a little
  // more than the margin, and a sequence that meets its margin leaves the loss (issue 31's
  // recipe: facts that hold do not keep pushing their rows).
  struct Pass {
    Tensor hinge, seq_ok, seq_of;
  };
  auto forward = [&](const Tensor& sel) {
    const int64_t b = sel.size(0);
    Tensor tg = tgt.index_select(0, sel);
    Tensor at = (tg >= 0).reshape({-1}).nonzero().squeeze(1);
    Tensor want = live_of_.index_select(0, tg.reshape({-1}).index_select(0, at));
    Pass p;
    p.seq_of = torch::div(at, T, "floor");
    Tensor m = seq_margin.index_select(0, sel).index_select(0, p.seq_of);  // per target
    auto [lg, full] = logits(sel, at, P);
    Tensor zt = lg.gather(1, want.unsqueeze(1)).squeeze(1);
    Tensor others = full.scatter(1, want.unsqueeze(1), -INFINITY).logsumexp(1);
    p.hinge = at::softplus(m + 0.5 - (zt - others));  // [N]
    torch::NoGradGuard ng;
    p.seq_ok = Fitted(lg.detach(), want, p.seq_of, b, m);
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
    // The hinge of every target of the unfitted sequences, summed; plus the L2 pull toward the
    // anchor (0 by default). (Right after a check every active sequence counts, so each check is
    // followed by a step even where a smaller batch rounds differently.)
    Tensor pick = all_ok ? torch::ones_like(p.seq_ok) : p.seq_ok.logical_not();
    Tensor w = pick.to(torch::kFloat32);
    Tensor loss = (p.hinge * w.index_select(0, p.seq_of)).sum() + prm.l2 * (P - P0).pow(2).sum();
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
Tensor TorchTransformer::Fitted(const Tensor& lg, const Tensor& want, const Tensor& seq_of,
                                int64_t b, const Tensor& margin) const {
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
void TorchTransformer::Shrink(const RowFitBatch& fb, const RowFitParams& prm, int64_t BF, Tensor& P,
                              const Tensor& P0, Logits& logits, const Tensor& tgt,
                              RowFitOutcome* out) {
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
    if (owner[static_cast<size_t>(r)] >= 0) group_rows[static_cast<size_t>(owner[r])].push_back(r);
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
    return Fitted(lg, want, seq_of, BF, torch::full({at.size(0)}, prm.margin, lg.options()))
        .contiguous();
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

}  // namespace engram::model

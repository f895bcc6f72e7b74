// `run`: prompts in batches of max_batch_size through the model (prefill, then sampled or greedy
// generation), or scored by perplexity, with the per-request engram_hit_rate lines and timings.
#include "engram/model/run.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <random>

#include "engram/base/error.h"
#include "engram/base/module_status.h"
#include "engram/base/resource.h"
#include "engram/model/generation.h"
#include "engram/model/sampling.h"
#include "engram/model/setup.h"
#include "engram/model/transformer.h"
#include "engram/table/lookup.h"
#include "engram/table/prefetch.h"

namespace engram::model {

using base::LogLevel;

namespace {

struct PositionCompare {
  double kl = 0, nll_a = 0, nll_b = 0;
  bool same_top1 = false;
};

// KL(softmax(a) || softmax(b)), both NLLs of `target`, and whether the argmaxes agree; in double.
PositionCompare ComparePosition(const float* a, const float* b, uint32_t V, uint32_t target) {
  const LogitsCompare l = CompareLogits(a, b, V);
  PositionCompare c;
  c.kl = l.kl;
  c.nll_a = l.lse_a - a[target];
  c.nll_b = l.lse_b - b[target];
  c.same_top1 = l.top_a == l.top_b;
  return c;
}

}  // namespace

RunResult RunImpl(const RunOptions& o, base::Reporter& rep) {
  base::Stopwatch total;
  RunResult res;
  Setup s;
  LoadSetup(o, rep, s, res);

  TransformerOptions to;
  to.dtype = o.dtype.empty() ? s.cfg.model.dtype : o.dtype;
  if (to.dtype == "bf16") to.dtype = "bfloat16";
  if (to.dtype == "f32") to.dtype = "float32";
  to.kv_cache_dtype = o.kv_cache_dtype.empty() ? s.cfg.inference.kv_cache_dtype : o.kv_cache_dtype;
  to.threads = o.threads;
  int max_batch = o.max_batch > 0 ? o.max_batch : static_cast<int>(s.cfg.inference.max_batch_size);
  to.max_batch = std::max(1, std::min<int>(max_batch, static_cast<int>(o.prompts.size())));
  if (o.perplexity) to.max_batch = 1;  // documents are scored one at a time, in windows
  to.max_seq = static_cast<int>(std::min<uint32_t>(s.mc.max_position_embeddings, 4096));
  base::Stopwatch load_sw;
  auto model = Transformer::Load(s.mc, to);
  res.load_seconds = load_sw.Seconds() + res.table_seconds;
  if (s.engram) rep.Log(LogLevel::kInfo, TableLoadedLine(res.table_seconds, res.device_bytes));

  // The table to compare with (perplexity mode): opened like the main one, the same layout.
  std::unique_ptr<format::TableView> other;
  if (!o.compare_table_path.empty()) {
    ENGRAM_CHECK(o.perplexity && s.engram, Code::kInvalidArgument,
                 "comparing tables needs perplexity mode and the Engram branch on");
    format::ViewOptions vo;
    vo.deterministic_addressing = s.cfg.engram.deterministic_addressing && !o.read_journal;
    vo.open.use_mmap = s.cfg.table.mmap;
    vo.open.lock = o.hold_table_lock ? format::ReadLock::kHold : format::ReadLock::kOpen;
    other = format::TableView::Open(o.compare_table_path, vo);
    const format::Layout &a = s.view->layout(), &b = other->layout();
    ENGRAM_CHECK(a.row_dim == b.row_dim && a.total_rows == b.total_rows &&
                     a.row_offsets == b.row_offsets && a.spec.seed == b.spec.seed &&
                     a.spec.layer_ids == b.spec.layer_ids && a.spec.mode == b.spec.mode &&
                     a.canon_map == b.canon_map,
                 Code::kInvalidArgument,
                 o.compare_table_path << " has another layout than " << s.view->reader().path()
                                      << "; only a table's conversions can be compared with it");
  }
  const uint32_t V = s.mc.vocab_size;
  const uint32_t N = s.engram ? s.view->layout().spec.max_order : 2;
  std::vector<float> logits;
  const SamplingParams sampling{o.temperature, o.top_k, o.top_p};
  size_t low_hit_requests = 0;  // requests with a low engram_hit_rate (explained once)
  // What the table scores on its own corpus: a request far below it is explained.
  const double corpus_rate = s.engram ? table::CorpusHitRate(s.view->reader()) : -1;
  for (size_t first = 0; first < o.prompts.size(); first += to.max_batch) {
    const size_t B = std::min<size_t>(to.max_batch, o.prompts.size() - first);
    std::vector<PromptResult> pr(B);
    std::vector<std::vector<uint32_t>> ids(B), canon(B);
    size_t T = 0;
    for (size_t b = 0; b < B; ++b) {
      pr[b].prompt = o.prompts[first + b];
      ids[b] = s.tok->Encode(pr[b].prompt);
      ENGRAM_CHECK(!ids[b].empty(), Code::kInvalidArgument,
                   "prompt " << first + b + 1 << " is empty after tokenization");
      for (uint32_t id : ids[b]) {
        ENGRAM_CHECK(id < V, Code::kInvalidArgument,
                     "token id " << id << " is outside the model's vocabulary");
        canon[b].push_back(s.Canonical(id));
      }
      pr[b].prompt_ids = ids[b];
      T = std::max(T, ids[b].size());
    }
    model->Reset();
    std::vector<std::mt19937_64> rng;
    for (size_t b = 0; b < B; ++b) rng.emplace_back(o.seed + 0x9E3779B97F4A7C15ull * (first + b));
    std::vector<uint64_t> seq_lookups(B, 0), seq_hits(B, 0);
    BatchStep stepper(*model, s.mc, s.engram ? s.view.get() : nullptr, s.table_layer, B);
    std::unique_ptr<BatchStep> other_stepper;
    if (other)
      other_stepper = std::make_unique<BatchStep>(*model, s.mc, other.get(), s.table_layer, B);
    // One step over the given per-sequence new tokens; the Engram hit counts add up per request.
    auto step = [&](const std::vector<std::vector<uint32_t>>& fresh, bool all_logits,
                    const std::vector<int64_t>* targets = nullptr) {
      const size_t t_len = stepper.Step(fresh, canon, all_logits, targets, &logits);
      for (size_t b = 0; b < B; ++b) {
        seq_lookups[b] += stepper.lookups()[b];
        seq_hits[b] += stepper.hits()[b];
      }
      res.staging_bytes = std::max(res.staging_bytes, stepper.staging_bytes());
      return t_len;
    };
    base::Stopwatch prompt_sw;
    if (o.perplexity) {
      // Teacher forcing over windows of at most `window` tokens (a fresh KV cache each; Engram
      // history runs on across windows): every token after a document's first is scored.
      const size_t window = std::min<size_t>(to.max_seq, 512);
      std::vector<std::vector<uint32_t>> all_ids = ids, all_canon = canon;
      for (size_t b = 0; b < B; ++b) {
        for (size_t w0 = 0; w0 < all_ids[b].size(); w0 += window) {
          const size_t w1 = std::min(all_ids[b].size(), w0 + window);
          model->Reset();
          stepper.Rewind();
          std::vector<std::vector<uint32_t>> fresh(B), hist(B);
          for (size_t k = 0; k < B; ++k) {
            // Only sequence b advances; the others take a one-token pad step that is ignored.
            fresh[k] = k == b
                           ? std::vector<uint32_t>(all_ids[b].begin() + w0, all_ids[b].begin() + w1)
                           : std::vector<uint32_t>{0};
            hist[k] = k == b
                          ? std::vector<uint32_t>(all_canon[b].begin(), all_canon[b].begin() + w1)
                          : std::vector<uint32_t>{0};
          }
          canon = hist;
          // Position t predicts token t + 1 (the last position of the document predicts nothing).
          std::vector<int64_t> tgt(w1 - w0, -1);
          for (size_t t = w0; t < w1; ++t)
            if (t + 1 < all_ids[b].size()) tgt[t - w0] = all_ids[b][t + 1];
          if (o.dump_logits) {
            size_t t_len = step(fresh, true);
            for (size_t t = 0; t < t_len; ++t)
              pr[b].logits.emplace_back(logits.begin() + t * V, logits.begin() + (t + 1) * V);
            model->Reset();
            stepper.Rewind();
          }
          if (other_stepper) {  // both tables' distributions, position by position
            const size_t t_len = step(fresh, true);
            std::vector<float> mine = std::move(logits);
            model->Reset();
            other_stepper->Rewind();
            other_stepper->Step(fresh, canon, true, nullptr, &logits);
            for (size_t t = 0; t < t_len; ++t) {
              if (tgt[t] < 0) continue;
              const PositionCompare c = ComparePosition(mine.data() + t * V, logits.data() + t * V,
                                                        V, static_cast<uint32_t>(tgt[t]));
              res.compare.kl.push_back(static_cast<float>(c.kl));
              res.compare.top1_agree += c.same_top1;
              res.compare.nll += c.nll_a;
              res.compare.compare_nll += c.nll_b;
              res.compare.tokens++;
              pr[b].nll += c.nll_a;
              pr[b].compare_nll += c.nll_b;
              pr[b].scored_tokens++;
            }
            res.prompt_tokens += w1 - w0;
            continue;
          }
          step(fresh, true, &tgt);
          for (size_t t = w0; t < w1; ++t)
            if (tgt[t - w0] >= 0) {
              pr[b].nll += logits[t - w0];
              pr[b].scored_tokens++;
            }
          res.prompt_tokens += w1 - w0;
        }
      }
      res.prompt_seconds += prompt_sw.Seconds();
    } else {
      step(ids, false);
      res.prompt_seconds += prompt_sw.Seconds();
      for (size_t b = 0; b < B; ++b) res.prompt_tokens += ids[b].size();
      base::Stopwatch eval_sw;
      std::vector<bool> done(B, false);
      const int n_predict = o.n_predict < 0 ? INT_MAX : o.n_predict;
      std::vector<float> penalised;
      for (int n = 0; n < n_predict; ++n) {
        std::vector<std::vector<uint32_t>> next(B);
        for (size_t b = 0; b < B; ++b) {
          const float* lg = logits.data() + b * V;
          if (o.dump_logits && !done[b]) pr[b].logits.emplace_back(lg, lg + V);
          if (o.repeat_penalty != 1.0 && o.repeat_last_n != 0 && !done[b]) {
            penalised.assign(lg, lg + V);
            ApplyRepeatPenalty(ids[b], o.repeat_penalty, o.repeat_last_n, &penalised);
            lg = penalised.data();
          }
          uint32_t t = Sample(lg, V, sampling, &rng[b]);
          next[b] = {t};
          if (done[b]) continue;
          if (ids[b].size() + 1 > static_cast<size_t>(to.max_seq)) {
            done[b] = true;
            rep.Log(LogLevel::kNote, "request " + std::to_string(first + b + 1) +
                                         ": stopped at the context limit of " +
                                         std::to_string(to.max_seq) + " tokens");
            continue;
          }
          if (s.mc.eos_token_id >= 0 && t == static_cast<uint32_t>(s.mc.eos_token_id)) {
            done[b] = true;
            continue;
          }
          pr[b].output_ids.push_back(t);
          res.eval_tokens++;
          ids[b].push_back(t);
          canon[b].push_back(s.Canonical(t));
        }
        if (n + 1 == n_predict || std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
          break;
        step(next, false);
      }
      res.eval_seconds += eval_sw.Seconds();
    }
    for (size_t b = 0; b < B; ++b) {
      pr[b].text = s.tok->Decode(pr[b].output_ids);
      pr[b].engram_lookups = seq_lookups[b];
      pr[b].engram_hits = seq_hits[b];
      pr[b].bypass = s.engram && pr[b].prompt_ids.size() < N;
      const std::string req = "[engram] request " + std::to_string(first + b + 1) + ": ";
      if (!s.engram) continue;
      if (pr[b].bypass)
        rep.Log(LogLevel::kInfo,
                req + "engram bypass: the prompt has " + std::to_string(pr[b].prompt_ids.size()) +
                    " token(s), fewer than the n-gram order " + std::to_string(N) +
                    ", so its first positions have no full n-gram (normal, not an error)");
      char line[200];
      double rate = pr[b].engram_lookups ? static_cast<double>(pr[b].engram_hits) /
                                               static_cast<double>(pr[b].engram_lookups)
                                         : 0;
      std::snprintf(line, sizeof line,
                    "engram_hit_rate: %.4f (%llu hits / %llu lookups), engram lookup miss: %llu",
                    rate, static_cast<unsigned long long>(pr[b].engram_hits),
                    static_cast<unsigned long long>(pr[b].engram_lookups),
                    static_cast<unsigned long long>(pr[b].engram_lookups - pr[b].engram_hits));
      rep.Log(LogLevel::kInfo, req + line);
      if (pr[b].engram_lookups == 0)
        rep.Log(
            LogLevel::kInfo,
            req +
                "engram_hit_rate is 0 because no position has a full n-gram (the input is shorter "
                "than order 2)");
      else if (std::string note =
                   table::LowHitRateNote(rate, pr[b].engram_lookups, corpus_rate, s.view->layout());
               !note.empty() && low_hit_requests++ == 0)
        rep.Log(LogLevel::kWarning, req + note);
    }
    for (auto& p : pr) res.prompts.push_back(std::move(p));
  }
  if (low_hit_requests > 1)
    rep.Log(LogLevel::kWarning, "[engram] engram_hit_rate low (as above) in " +
                                    std::to_string(low_hit_requests) + " of " +
                                    std::to_string(o.prompts.size()) + " requests");
  if (s.engram) {
    auto status = table::Status(s.view->reader().path());
    res.table_resident_bytes = status.resident_bytes;
  }
  res.total_seconds = total.Seconds();
  return res;
}

}  // namespace engram::model

extern "C" int engram_model_run_v3(const engram::model::RunOptions* opts,
                                   engram::base::Reporter* reporter,
                                   engram::model::RunResult* result, std::string* error) {
  return engram::base::CatchAsStatus("the model module", error,
                                     [&] { *result = engram::model::RunImpl(*opts, *reporter); });
}

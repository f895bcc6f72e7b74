// serve's model session: the model and table loaded once, requests generated in batches token by
// token (per-request sampling, stop strings, streaming, cancellation), and a committed append or
// a fold picked up between batches while the last good table state keeps serving.
#include "engram/model/session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/module_status.h"
#include "engram/base/resource.h"
#include "engram/model/generation.h"
#include "engram/model/sampling.h"
#include "engram/model/setup.h"
#include "engram/model/transformer.h"
#include "engram/table/lookup.h"

namespace engram::model {

namespace {

using base::LogLevel;

// Identity of the table file as the last reload saw it: a committed append grows the file, a
// fold replaces it (new inode); either changes the stamp.
struct FileStamp {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// Bytes at the end of `text` that may not be emitted yet: a trailing incomplete UTF-8 sequence
// or U+FFFD (a token that ends inside a character), or a suffix that starts a stop string.
size_t Holdback(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  // Incomplete UTF-8 at the end.
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > k) hold = k;
    break;
  }
  static const std::string kReplacement = "\xEF\xBF\xBD";
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0)
    hold = std::max<size_t>(hold, 3);
  for (const auto& st : stop)
    for (size_t k = std::min(st.size() - 1, text.size()); k > hold; --k)
      if (text.compare(text.size() - k, k, st, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

class SessionImpl final : public Session {
 public:
  SessionImpl(const RunOptions& opts, base::Reporter& rep) : rep_(rep) {
    RunResult res;
    RunOptions o = opts;
    o.hold_table_lock = false;  // Batch takes the fold lock per batch
    if (!o.trace_path.empty()) {
      trace_path_ = o.trace_path;
      trace_ = base::OpenFile(o.trace_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    LoadSetup(o, rep, s_, res);
    TransformerOptions to;
    to.dtype = o.dtype.empty() ? s_.cfg.model.dtype : o.dtype;
    if (to.dtype == "bf16") to.dtype = "bfloat16";
    if (to.dtype == "f32") to.dtype = "float32";
    to.kv_cache_dtype =
        o.kv_cache_dtype.empty() ? s_.cfg.inference.kv_cache_dtype : o.kv_cache_dtype;
    to.threads = o.threads;
    to.max_batch = std::max(
        1, o.max_batch > 0 ? o.max_batch : static_cast<int>(s_.cfg.inference.max_batch_size));
    to.max_seq = static_cast<int>(std::min<uint32_t>(s_.mc.max_position_embeddings, 4096));
    base::Stopwatch load_sw;
    model_ = Transformer::Load(s_.mc, to);
    if (s_.engram) rep.Log(LogLevel::kInfo, TableLoadedLine(res.table_seconds, res.device_bytes));
    info_.model_dir =
        s_.mc.dir.empty() ? (o.model_dir.empty() ? s_.cfg.model.path : o.model_dir) : s_.mc.dir;
    info_.model_name = s_.cfg.model.name;
    if (info_.model_name.empty()) {
      std::string d = info_.model_dir;
      while (d.size() > 1 && d.back() == '/') d.pop_back();
      info_.model_name =
          d.substr(d.find_last_of('/') == std::string::npos ? 0 : d.find_last_of('/') + 1);
    }
    info_.engram = s_.engram;
    info_.deterministic_addressing = s_.cfg.engram.deterministic_addressing;
    info_.max_batch = to.max_batch;
    info_.max_seq = to.max_seq;
    info_.eos_token_id = static_cast<int>(s_.mc.eos_token_id);
    info_.load_seconds = load_sw.Seconds() + res.table_seconds;
    tok_fp_ = s_.tok->Fingerprint();
    if (s_.engram) {
      info_.table_path = s_.view->reader().path();
      info_.ngram_order = s_.view->layout().spec.max_order;
      info_.low_hit_rate_note = [layout = s_.view->layout(),
                                 corpus_rate = table::CorpusHitRate(s_.view->reader())](
                                    double rate, uint64_t lookups) {
        return table::LowHitRateNote(rate, lookups, corpus_rate, layout);
      };
      stamp_ = Stamp(info_.table_path);
      view_ = std::shared_ptr<const format::TableView>(std::move(s_.view));
      state_.generation = 1;
      state_.journal_commits = view_->journal().n_commits;
      state_.journal_entries = view_->journal().committed.size();
      state_.file_bytes = stamp_.size;
    }
  }

  const SessionInfo& info() const noexcept override { return info_; }

  TableState table_state() const noexcept override {
    std::lock_guard<std::mutex> lock(state_mu_);
    return state_;
  }

  void GenerateBatch(const std::vector<GenerateRequest*>& reqs,
                     std::vector<GenerateResult>* results) noexcept override {
    results->assign(reqs.size(), GenerateResult{});
    try {
      Batch(reqs, *results);
    } catch (const Error& e) {
      Fail(*results, e.what(), static_cast<int>(e.code()));
    } catch (const std::exception& e) {
      Fail(*results, std::string("internal error in the model module: ") + e.what(),
           static_cast<int>(Code::kInternal));
    }
  }

 private:
  static void Fail(std::vector<GenerateResult>& results, const std::string& msg, int code) {
    for (auto& r : results)
      if (r.finish_reason.empty() || r.finish_reason == "cancelled") {
        r.finish_reason = "error";
        r.error = msg;
        r.error_code = code;
      }
  }

  // Picks up a committed append (the file grew) or a fold (the file was replaced) between
  // batches. A state that cannot be opened leaves the last good one serving.
  void MaybeReload() {
    if (!s_.engram) return;
    const std::string& path = info_.table_path;
    FileStamp st = Stamp(path);
    if (st.ino == 0 || st == stamp_) return;
    stamp_ = st;  // taken before opening: a change during the open is seen next time
    try {
      format::ViewOptions vo;
      vo.deterministic_addressing = s_.cfg.engram.deterministic_addressing;
      vo.open.use_mmap = s_.cfg.table.mmap;
      std::shared_ptr<const format::TableView> v = format::TableView::Open(path, vo);
      CheckTableAgainstModel(v->layout(), s_.mc, tok_fp_, path);
      ENGRAM_CHECK(v->layout().canon_map.empty() || v->layout().canon_map == s_.canon,
                   Code::kInvalidArgument,
                   path << " now has another canonical-id map than the table loaded at start; "
                           "restart serve to use it");
      std::string line;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        view_ = std::move(v);
        state_.generation++;
        state_.journal_commits = view_->journal().n_commits;
        state_.journal_entries = view_->journal().committed.size();
        state_.file_bytes = st.size;
        state_.stale = false;
        line = "[engram] table generation " + std::to_string(state_.generation) + ": " + path +
               " (" + std::to_string(state_.journal_commits) + " journal commits, " +
               std::to_string(state_.journal_entries) + " entries overlaid)";
      }
      stale_said_ = false;
      rep_.Log(LogLevel::kInfo, line);
    } catch (const Error& e) {
      const std::string what = e.what();
      uint64_t gen;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        gen = state_.generation;
        if (e.code() == Code::kConfig &&
            what.find("deterministic addressing requires") != std::string::npos)
          state_.stale = true;
      }
      if (what.find("deterministic addressing requires") != std::string::npos) {
        if (!stale_said_)
          rep_.Log(LogLevel::kWarning,
                   "[engram] " + path +
                       " has appended entries that are not folded; with "
                       "deterministic addressing the server keeps serving table generation " +
                       std::to_string(gen) +
                       " (the last folded state): run 'engramctl sort-buckets " + path +
                       "' to serve them (or set engram.deterministic_addressing = false)");
        stale_said_ = true;
      } else {
        rep_.Log(LogLevel::kWarning, "[engram] table change not picked up, generation " +
                                         std::to_string(gen) + " keeps serving: " + what);
      }
    }
  }

  void Batch(const std::vector<GenerateRequest*>& reqs, std::vector<GenerateResult>& res) {
    ENGRAM_CHECK(reqs.size() <= static_cast<size_t>(info_.max_batch), Code::kInternal,
                 "batch of " << reqs.size() << " requests, the session holds " << info_.max_batch);
    // The fold lock for the whole batch (schemas/table_format.md §5.8): an in-place fold waits
    // for it, and the batch reads one table state from start to end. Taken before the reload
    // check, on the file of the view that serves, so the check and the rows agree.
    format::FoldReadLock table_lock;
    for (int attempt = 0; s_.engram && attempt < 4; ++attempt) {
      std::shared_ptr<const format::TableView> v;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        v = view_;
      }
      table_lock = format::FoldReadLock();  // never wait for a fold while holding the file
      table_lock = format::FoldReadLock(v->reader().fd(), /*yield=*/true);
      MaybeReload();
      std::lock_guard<std::mutex> lock(state_mu_);
      if (view_ == v) break;
    }
    std::shared_ptr<const format::TableView> view;
    TableState state;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      view = view_;
      state = state_;
    }
    const uint32_t V = s_.mc.vocab_size;
    const uint32_t N = s_.engram ? view->layout().spec.max_order : 2;
    // Requests that can run (the others finish with an error now).
    std::vector<size_t> live;
    std::vector<std::vector<uint32_t>> ids, canon;
    for (size_t i = 0; i < reqs.size(); ++i) {
      res[i].table = state;
      res[i].batch_size = static_cast<int>(reqs.size());
      std::vector<uint32_t> p = s_.tok->Encode(reqs[i]->prompt);
      std::string err;
      if (p.empty()) err = "the prompt is empty after tokenization; send some text";
      for (uint32_t id : p)
        if (id >= V) err = "token id " + std::to_string(id) + " is outside the model's vocabulary";
      if (err.empty() && p.size() + static_cast<size_t>(std::max(0, reqs[i]->max_tokens)) >
                             static_cast<size_t>(info_.max_seq))
        err = "the prompt has " + std::to_string(p.size()) + " tokens and max_tokens is " +
              std::to_string(reqs[i]->max_tokens) + ", more than the model's context of " +
              std::to_string(info_.max_seq) + " tokens; shorten the prompt or lower max_tokens";
      res[i].prompt_tokens = p.size();
      if (!err.empty()) {
        res[i].finish_reason = "error";
        res[i].error = err;
        res[i].error_code = static_cast<int>(Code::kInvalidArgument);
        continue;
      }
      res[i].bypass = s_.engram && p.size() < N;
      live.push_back(i);
      canon.push_back(s_.Canonical(p));
      ids.push_back(std::move(p));
    }
    const size_t B = live.size();
    if (B == 0) return;
    model_->Reset();
    std::vector<std::mt19937_64> rng;
    std::vector<SamplingParams> samp(B);
    for (size_t b = 0; b < B; ++b) {
      const GenerateRequest& q = *reqs[live[b]];
      rng.emplace_back(q.seed);
      samp[b].temperature = q.temperature;
      samp[b].top_k = q.top_k;
      samp[b].top_p = q.top_p;
    }
    std::vector<float> logits;
    BatchStep stepper(*model_, s_.mc, s_.engram ? view.get() : nullptr, s_.table_layer, B);
    const std::vector<uint64_t>& lk = stepper.lookups();
    const std::vector<uint64_t>& ht = stepper.hits();
    auto step = [&](const std::vector<std::vector<uint32_t>>& fresh) {
      stepper.Step(fresh, canon, false, nullptr, &logits);
    };
    base::Stopwatch prompt_sw;
    step(ids);
    for (size_t b = 0; b < B; ++b) {
      res[live[b]].prompt_lookups = lk[b];
      res[live[b]].prompt_hits = ht[b];
    }
    const double prompt_seconds = prompt_sw.Seconds();
    base::Stopwatch eval_sw;
    std::vector<bool> done(B, false);
    std::vector<std::vector<uint32_t>> out(B);
    std::vector<size_t> emitted(B, 0);
    int max_new = 0;
    for (size_t b = 0; b < B; ++b) max_new = std::max(max_new, reqs[live[b]]->max_tokens);
    auto finish = [&](size_t b, const std::string& reason, const std::string& text) {
      GenerateResult& r = res[live[b]];
      const GenerateRequest& q = *reqs[live[b]];
      if (reason != "cancelled" && emitted[b] < text.size() && q.on_text &&
          !q.on_text(std::string_view(text).substr(emitted[b])))
        r.finish_reason = "cancelled";
      else
        r.finish_reason = reason;
      r.text = text;
      r.completion_tokens = out[b].size();
      done[b] = true;
    };
    for (size_t b = 0; b < B; ++b)
      if (reqs[live[b]]->max_tokens <= 0) finish(b, "length", "");
    for (int n = 0; n < max_new; ++n) {
      std::vector<std::vector<uint32_t>> next(B);
      for (size_t b = 0; b < B; ++b) {
        const float* lg = logits.data() + b * V;
        uint32_t t = Sample(lg, V, samp[b], &rng[b]);
        next[b] = {t};
        if (done[b]) continue;
        const GenerateRequest& q = *reqs[live[b]];
        if (s_.mc.eos_token_id >= 0 && t == static_cast<uint32_t>(s_.mc.eos_token_id)) {
          finish(b, "stop", s_.tok->Decode(out[b]));
          continue;
        }
        out[b].push_back(t);
        ids[b].push_back(t);
        canon[b].push_back(s_.Canonical(t));
        std::string text = s_.tok->Decode(out[b]);
        size_t cut = std::string::npos;
        for (const auto& st : q.stop) {
          if (st.empty()) continue;
          size_t from = emitted[b] >= st.size() ? emitted[b] - st.size() + 1 : 0;
          size_t p = text.find(st, from);
          if (p != std::string::npos) cut = std::min(cut, p);
        }
        if (cut != std::string::npos) {
          finish(b, "stop", text.substr(0, cut));
          continue;
        }
        if (static_cast<int>(out[b].size()) >= q.max_tokens) {
          finish(b, "length", text);
          continue;
        }
        size_t safe = text.size() - Holdback(text, q.stop);
        if (safe > emitted[b] && q.on_text) {
          if (!q.on_text(std::string_view(text).substr(emitted[b], safe - emitted[b]))) {
            emitted[b] = safe;
            finish(b, "cancelled", text);
            continue;
          }
          emitted[b] = safe;
        }
      }
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
      step(next);
      for (size_t b = 0; b < B; ++b) {
        // Lookups of the step that fed each unfinished request's newest token.
        if (!done[b]) {
          res[live[b]].gen_lookups += lk[b];
          res[live[b]].gen_hits += ht[b];
        }
      }
    }
    const double eval_seconds = eval_sw.Seconds();
    for (size_t b = 0; b < B; ++b) {
      if (!done[b]) finish(b, "length", s_.tok->Decode(out[b]));
      res[live[b]].prompt_seconds = prompt_seconds;
      res[live[b]].eval_seconds = eval_seconds;
    }
    if (trace_.valid()) WriteTrace(canon);
  }

  // One write per request (O_APPEND): a reader of the trace sees whole requests. A failing write
  // is said once and the trace stops; serving goes on.
  void WriteTrace(const std::vector<std::vector<uint32_t>>& canon) {
    for (const auto& ids : canon) {
      std::vector<uint8_t> buf((ids.size() + 1) * 4);
      for (size_t i = 0; i < ids.size(); ++i) base::StoreLE<uint32_t>(buf.data() + 4 * i, ids[i]);
      base::StoreLE<uint32_t>(buf.data() + 4 * ids.size(), 0xFFFFFFFFu);
      if (::write(trace_.get(), buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
        rep_.Log(LogLevel::kWarning, "[serve] --trace " + trace_path_ + ": write failed (" +
                                         std::strerror(errno) + "); the trace stops here");
        trace_ = base::UniqueFd();
        return;
      }
    }
  }

  base::Reporter& rep_;
  base::UniqueFd trace_;  // -1 without --trace
  std::string trace_path_;
  Setup s_;
  std::unique_ptr<Transformer> model_;
  SessionInfo info_;
  uint64_t tok_fp_ = 0;
  FileStamp stamp_;
  bool stale_said_ = false;
  mutable std::mutex state_mu_;
  std::shared_ptr<const format::TableView> view_;
  TableState state_;
};

}  // namespace

}  // namespace engram::model

extern "C" int engram_model_session_v3(const engram::model::RunOptions* opts,
                                       engram::base::Reporter* reporter,
                                       engram::model::Session** out, std::string* error) {
  // Ownership crosses the plugin boundary as a raw pointer (C linkage); the caller deletes it.
  return engram::base::CatchAsStatus(
      "the model module", error, [&] { *out = new engram::model::SessionImpl(*opts, *reporter); });
}

// `append --fit`: choose the rows a fact reads where its target is predicted, fit them through
// the frozen model (Transformer::FitRows), round them to the table's dtype, check each fact
// again by greedy decoding through the same forward pass `run` uses, and report.
#include "engram/model/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/module_status.h"
#include "engram/base/resource.h"
#include "engram/format/safetensors.h"
#include "engram/hash/addressing.h"
#include "engram/hash/ngram_hash.h"
#include "engram/model/sampling.h"
#include "engram/model/setup.h"
#include "engram/model/transformer.h"
#include "engram/table/gather.h"

namespace engram::model {

namespace {

using base::LogLevel;

// One phrasing of a fact (or a text) as a token sequence: ids[0..n) with targets predicted at
// positions first..n-2.
struct Seq {
  std::vector<uint32_t> ids, canon;
  size_t first = 0;  // first position whose next token is a target
  size_t task = 0;   // index into Fitter::tasks_
};

// A fact the fit must make (an entry of the file) or keep (a ledger fact whose rows it touches),
// with the sequences of its phrasings.
struct Task {
  bool constraint = false;  // a ledger fact kept, not an entry
  bool subject = false;     // its subject's rows are trainable too (phase 2)
  size_t entry = 0;         // entries: index into FitOptions::entries
  size_t ledger = 0;        // constraints: index into Fitter::ledger_
  std::vector<size_t> seqs;
  std::vector<uint32_t> target_ids;
};

// --head-dtype: bf16 products where asked, or for "auto" where the CPU has bf16 dot-product
// instructions (elsewhere libtorch emulates them, slower than f32).
bool BF16Head(const std::string& head_dtype) {
  if (head_dtype == "bf16") return true;
  if (head_dtype != "auto") return false;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#else
  return false;
#endif
}

std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

// The n-gram order of column c of a position's rows ([order][head], `heads` heads an order). The
// n-gram ending at position t is full (no padding) when t + 1 >= that order.
inline uint32_t ColumnOrder(size_t c, size_t heads) noexcept {
  return static_cast<uint32_t>(c / heads) + hash::kMinOrder;
}

// Rows of Engram layer k for positions [t0, t1) of one sequence, decoded to f32 with `overlay`
// (row -> values) in place of the table's, laid out [t - t0][per][row_dim].
class RowSource {
 public:
  RowSource(const format::TableView& view, const std::vector<size_t>& table_layer)
      : view_(view), table_layer_(table_layer) {}

  // Global row ids of every position of `canon` for every Engram layer: [k][t][c].
  std::vector<std::vector<uint64_t>> Rows(const std::vector<uint32_t>& canon) const {
    const format::Layout& l = view_.layout();
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
    std::vector<std::vector<uint64_t>> out(table_layer_.size());
    std::vector<uint64_t> buckets(canon.size() * per);
    for (size_t k = 0; k < table_layer_.size(); ++k) {
      hash::ComputeBuckets(l.spec, table_layer_[k], canon, buckets.data());
      out[k].resize(canon.size() * per);
      for (size_t t = 0; t < canon.size(); ++t)
        for (size_t c = 0; c < per; ++c) {
          const uint32_t n = ColumnOrder(c, heads);
          out[k][t * per + c] =
              l.RowOf(l.spec.SubIndex(table_layer_[k], n, static_cast<uint32_t>(c % heads)),
                      buckets[t * per + c]);
        }
    }
    return out;
  }

  void Fill(const std::vector<uint64_t>& rows, size_t t0, size_t t1,
            const std::unordered_map<uint64_t, const float*>& overlay, float* out) const {
    const format::Layout& l = view_.layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim;
    std::span<const uint64_t> span(rows.data() + t0 * per, (t1 - t0) * per);
    table::GatherRowsF32(view_, span, out);
    if (overlay.empty()) return;
    for (size_t i = 0; i < span.size(); ++i)
      if (auto it = overlay.find(span[i]); it != overlay.end())
        std::memcpy(out + i * D, it->second, D * sizeof(float));
  }

 private:
  const format::TableView& view_;
  const std::vector<size_t>& table_layer_;
};

class Fitter {
 public:
  Fitter(const FitOptions& o, base::Reporter& rep) : o_(o), rep_(rep) {}

  FitResult Run() {
    RunResult rr;
    RunOptions ro = o_.run;
    ro.read_journal = true;  // fit against every committed row
    LoadSetup(ro, rep_, s_, rr);
    ENGRAM_CHECK(s_.engram, Code::kInvalidArgument,
                 "append --fit needs the model's Engram branch: the config disables it or the "
                 "model has no Engram layers");
    const format::Layout& l = s_.view->layout();
    max_seq_ = std::min<uint32_t>(s_.mc.max_position_embeddings, 4096);
    ledger_ = s_.view->Ledger();
    FitResult res;
    res.dtype = std::string(base::DTypeName(l.dtype));
    res.ledger_facts = ledger_.size();
    if (o_.check_only) {
      Check(&res);
      SortPitfalls(&res);
      return res;
    }
    TransformerOptions to;
    to.dtype =
        s_.cfg.model.dtype == "bf16" || s_.cfg.model.dtype == "bfloat16" ? "bfloat16" : "float32";
    to.threads = o_.run.threads;
    to.max_batch = 1;
    to.max_seq = static_cast<int>(max_seq_);
    model_ = Transformer::Load(s_.mc, to);
    rep_.Log(LogLevel::kInfo, TableLoadedLine(rr.table_seconds, 0));
    if (o_.ask_ledger) {
      AskLedger(&res);
      return res;
    }
    Tokenize(/*throw_on_problems=*/true);

    base::Stopwatch sw;
    // Phase 1 (issue 31's recipe): only the highest-order rows read where each target is
    // predicted, the rows that identify the fact; lower orders are shared with near misses.
    ChooseRows(&res);
    AddLedgerConstraints(&res);
    BuildBatch();
    PlanNearMisses();
    AddPreservation(&res);
    lp_before_.resize(seqs_.size());
    greedy_before_.resize(seqs_.size());
    for (size_t q = 0; q < seqs_.size(); ++q) Evaluate(q, {}, &lp_before_[q], &greedy_before_[q]);
    current_ = anchor_;
    seq_margin_.assign(seqs_.size(), static_cast<float>(o_.margin));
    for (const Task& t : tasks_)
      if (t.constraint)
        for (size_t q : t.seqs) seq_margin_[q] = std::max(ledger_[t.ledger].margin, 1e-3f);
    FitRounds(o_.steps, o_.refits, &res);
    // Phase 2, for the entries that do not hold yet: their subject's rare n-grams at the four
    // positions before the prompt's last token become trainable too; every fact that holds is
    // a constraint at the margin it holds.
    // A ledger fact that held before and broke is failing too; and a fact that shares rows with
    // a failing one gets its subject's rows as well, since two facts whose last words read the
    // same rows ("The founder of Farrowdene was", "The mayor of Farrowdene was") can only be told
    // apart by rows that differ between them, on both sides.
    std::vector<size_t> failing;
    size_t failing_entries = 0;
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (TaskHolds(t)) continue;
      if (tasks_[t].constraint && !TaskHolds(t, &greedy_before_)) continue;  // cannot lose it
      failing.push_back(t);
      failing_entries += !tasks_[t].constraint;
    }
    if (failing_entries > 0 && o_.subject_rows && o_.positions == "last") {
      std::set<uint64_t> failing_rows;
      for (size_t t : failing) {
        const std::vector<uint64_t> r = TargetRows(t);
        failing_rows.insert(r.begin(), r.end());
      }
      std::vector<size_t> partners;
      for (size_t t = 0; t < tasks_.size(); ++t) {
        if (std::find(failing.begin(), failing.end(), t) != failing.end()) continue;
        for (uint64_t row : TargetRows(t))
          if (failing_rows.count(row)) {
            partners.push_back(t);
            break;
          }
      }
      const size_t before = row_ids_.size();
      for (size_t t : failing) {
        tasks_[t].subject = true;
        for (size_t q : tasks_[t].seqs) AddSubjectRows(q);
      }
      for (size_t t : partners) {
        tasks_[t].subject = true;
        for (size_t q : tasks_[t].seqs) AddSubjectRows(q);
      }
      if (row_ids_.size() > before) {
        rep_.Log(LogLevel::kNote,
                 std::to_string(failing_entries) + " of " + std::to_string(res.entries.size()) +
                     " entries do not hold with their last words' rows alone; fitting them "
                     "again with " +
                     std::to_string(row_ids_.size() - before) + " rows of their subjects" +
                     (failing.size() + partners.size() > failing_entries
                          ? " and of " +
                                std::to_string(failing.size() + partners.size() - failing_entries) +
                                " facts that share their rows"
                          : std::string()));
        ExtendBatch(before);
        for (size_t t : failing)
          if (!tasks_[t].constraint)
            for (size_t q : tasks_[t].seqs) seq_margin_[q] = static_cast<float>(o_.margin);
        FitRounds(o_.subject_steps, o_.subject_refits, &res);
      }
    }
    res.fit_seconds = sw.Seconds();
    {
      Overlay ov = MakeOverlay(current_);
      AskNearMisses(ov.map, &res);
    }
    if (res.near_misses > 0)
      rep_.Log(LogLevel::kNote,
               "near misses (each prompt's frame with another fact's subject): " +
                   std::to_string(res.near_misses) + " asked, " +
                   std::to_string(res.near_misses_changed) + " changed their first token, " +
                   std::to_string(res.near_misses_say_target) + " now say a fitted target");
    Report(&res);
    const std::vector<float>& rounded = current_;
    // Rows whose stored value changes.
    const size_t D = l.row_dim;
    std::vector<uint8_t> a(l.row_stride() + l.scale_stride()), b(a.size());
    std::vector<uint64_t> written;
    for (size_t i = 0; i < row_info_.size(); ++i) {
      std::span<const float> old(anchor_.data() + i * D, D), now(rounded.data() + i * D, D);
      base::EncodeRow(l.dtype, old, a.data(), a.data() + l.row_stride());
      base::EncodeRow(l.dtype, now, b.data(), b.data() + l.row_stride());
      if (a == b) continue;
      FitRow fr = row_info_[i];
      fr.value.assign(now.begin(), now.end());
      res.rows.push_back(std::move(fr));
      written.push_back(row_ids_[i]);
    }
    ReportExposure(written, &res);
    if (!o_.check_corpus.empty()) CheckCorpus(rounded, &res);
    return res;
  }

  // The share of text positions that read at least one row this fit writes, were their n-grams
  // hashed uniformly: a position reads one row of every sub-table, so it is 1 - the product over
  // sub-tables of (1 - rows written in it / its rows). Every such position sees a fitted value
  // meant for another context (a hash collision): unrelated prompts may change, and the share
  // grows with the facts per bucket. A table tiled to more buckets keeps the same answers with
  // fewer collisions.
  void ReportExposure(const std::vector<uint64_t>& written, FitResult* res) {
    const format::Layout& l = s_.view->layout();
    const size_t subs = l.row_offsets.size();
    std::vector<uint64_t> in_sub(subs, 0);
    for (uint64_t row : written) ++in_sub[l.SubtableOf(row)];
    double untouched = 1.0;
    for (size_t li = 0; li < l.spec.n_layers(); ++li)
      for (uint32_t n = hash::kMinOrder; n <= l.spec.max_order; ++n)
        for (uint32_t h = 0; h < l.spec.n_heads; ++h) {
          const size_t k = l.spec.SubIndex(li, n, h);
          const uint64_t rows = l.SubtableRows(k);
          if (rows == 0 || in_sub[k] == 0) continue;
          untouched *= 1.0 - static_cast<double>(in_sub[k]) / static_cast<double>(rows);
          res->written_by_subtable.push_back({l.spec.layer_ids[li], n, h, in_sub[k], rows});
        }
    res->exposure = 1.0 - untouched;
    if (written.empty()) return;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * res->exposure);
    const std::string line = std::to_string(written.size()) + " rows written: about " + pct +
                             " of the positions of unrelated text read at least one of them "
                             "(hash collisions)";
    const bool native = l.spec.mode == hash::AddressingMode::kNative;
    if (res->exposure > kExposureWarn)
      rep_.Log(LogLevel::kWarning,
               line + "; such text may change its answers. Fit fewer facts into this table" +
                   (native ? ", or fit them into a table built with more buckets per "
                             "sub-table (a larger hash_buckets with build --values ... "
                             "--tile-values: the same answers, fewer collisions)"
                           : ""));
    else
      rep_.Log(LogLevel::kNote, line);
  }
  static constexpr double kExposureWarn = 0.05;

  // Optimises current_ for at most `steps` steps a round: the rows rounded to the table's dtype
  // after each round and every sequence checked again by greedy decoding; a sequence that held
  // before rounding and broke gets another round from the rounded rows with its margin doubled,
  // up to `refits` more rounds.
  void FitRounds(int steps, int refits, FitResult* res) {
    if (row_ids_.empty()) {
      for (size_t q = 0; q < seqs_.size(); ++q) Evaluate(q, {}, &lp_after_[q], &greedy_after_[q]);
      return;
    }
    lp_after_.resize(seqs_.size());
    greedy_after_.resize(seqs_.size());
    for (int round = 0; round <= refits; ++round) {
      RowFitParams prm;
      prm.steps = steps;
      prm.lr = o_.lr;
      prm.l2 = o_.l2;
      prm.margin = o_.margin;
      prm.keep = o_.keep;
      prm.bf16_head = BF16Head(o_.head_dtype);
      prm.shrink = o_.shrink;
      prm.progress = [&](int step, int, double) {
        rep_.Progress("fit", static_cast<uint64_t>(step), static_cast<uint64_t>(steps), "steps");
        return true;
      };
      batch_.margins.assign(seq_margin_.begin(), seq_margin_.end());
      base::Stopwatch loop;
      RowFitOutcome out = model_->FitRows(batch_, prm, anchor_, &current_);
      res->loop_seconds += loop.Seconds();
      rep_.ProgressDone("fit");
      res->steps += out.steps;
      res->preserve_kl = out.keep_kl;
      res->shrink_factor = out.shrink;
      res->rounds += 1;
      current_ = Round(current_);
      Overlay ov = MakeOverlay(current_);
      std::vector<size_t> broke;  // held before rounding, not after
      for (size_t q = 0; q < seqs_.size(); ++q) {
        Evaluate(q, ov.map, &lp_after_[q], &greedy_after_[q]);
        const bool ok = greedy_after_[q] == TargetText(q);
        if (!ok && q < out.fitted.size() && out.fitted[q]) broke.push_back(q);
      }
      // Another round only helps where rounding broke a fit; one the optimiser could not fit
      // within its steps is left to the next phase (or reported).
      if (broke.empty()) break;
      if (round < refits) {
        for (size_t q : broke) seq_margin_[q] *= 2;
        rep_.Log(LogLevel::kNote, std::to_string(broke.size()) + " of " +
                                      std::to_string(seqs_.size()) +
                                      " sequences fitted but not reproduced after rounding to " +
                                      res->dtype + "; fitting them again with twice the margin");
      }
    }
  }

  // The trainable rows task t reads where its targets are predicted, sorted.
  std::vector<uint64_t> TargetRows(size_t t) {
    const size_t per = s_.view->layout().spec.per_layer(), heads = s_.view->layout().spec.n_heads;
    std::set<uint64_t> out;
    for (size_t q : tasks_[t].seqs) {
      const Seq& s = seqs_[q];
      const auto& rows = SeqRows(q);
      for (const auto& k : rows)
        for (size_t pos = s.first; pos + 1 < s.ids.size(); ++pos)
          for (size_t c = 0; c < per; ++c)
            if (pos + 1 >= ColumnOrder(c, heads) && trainable_.count(k[pos * per + c]))
              out.insert(k[pos * per + c]);
    }
    return {out.begin(), out.end()};
  }

  // Whether every phrasing of task t gives its target in `greedy` (greedy_before_, or by default
  // greedy_after_: after the last round).
  bool TaskHolds(size_t t, const std::vector<std::string>* greedy = nullptr) const {
    const std::vector<std::string>& g = greedy ? *greedy : greedy_after_;
    for (size_t q : tasks_[t].seqs)
      if (q >= g.size() || g[q] != TargetText(q)) return false;
    return true;
  }

  // Phase 2's rows for sequence q: at the four positions before its prompt's last token (from
  // position 1), every layer, order and head row whose n-gram is rare in the build corpus (the
  // row's owner count, STATS, below kSubjectMaxCount: the n-gram is at most that frequent) and
  // belongs to no other fact of the batch or the ledger (the frame's n-grams, "capital of",
  // are shared by every fact of the frame).
  void AddSubjectRows(size_t q) {
    static constexpr uint32_t kSubjectMaxCount = 5;
    static constexpr size_t kSubjectPositions = 4;
    const format::Layout& l = s_.view->layout();
    const format::TableView& v = *s_.view;
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
    if (!v.reader().has_stats()) return;  // rarity is unknown without STATS
    if (shared_ngrams_.empty()) CountSharedNgrams();
    const Seq& s = seqs_[q];
    const auto& rows = SeqRows(q);
    uint32_t scratch[hash::kMaxOrder];
    for (size_t back = 1; back <= kSubjectPositions && back <= s.first; ++back) {
      const size_t pos = s.first - back;
      if (pos < 1) break;
      for (size_t k = 0; k < rows.size(); ++k)
        for (size_t c = 0; c < per; ++c) {
          const uint32_t n = ColumnOrder(c, heads);
          if (pos + 1 < n) continue;
          const uint64_t row = rows[k][pos * per + c];
          if (trainable_.count(row)) continue;
          if (v.reader().Stats(row).owner_count >= kSubjectMaxCount && !v.Overlay(row)) continue;
          const uint32_t* g = hash::NgramAt(l.spec, s.canon, pos, n, scratch);
          std::vector<uint32_t> gram(g, g + n);
          if (auto it = shared_ngrams_.find(gram); it != shared_ngrams_.end() && it->second > 1)
            continue;
          trainable_.emplace(row, static_cast<int64_t>(row_ids_.size()));
          row_ids_.push_back(row);
          FitRow fr;
          fr.layer_id = l.spec.layer_ids[s_.table_layer[k]];
          fr.head = static_cast<uint32_t>(c % heads);
          fr.canon = gram;
          const Task& t = tasks_[s.task];
          fr.line = t.constraint ? 0 : o_.entries[t.entry].line;
          row_info_.push_back(std::move(fr));
        }
    }
  }

  // How many facts (tasks of the batch, facts of the ledger) hold each n-gram of their prompts.
  void CountSharedNgrams() {
    const format::Layout& l = s_.view->layout();
    uint32_t scratch[hash::kMaxOrder];
    auto count = [&](const std::vector<std::vector<uint32_t>>& canons) {
      std::set<std::vector<uint32_t>> mine;
      for (const auto& canon : canons)
        for (size_t pos = 0; pos < canon.size(); ++pos)
          for (uint32_t n = hash::kMinOrder; n <= l.spec.max_order && n <= pos + 1; ++n) {
            const uint32_t* g = hash::NgramAt(l.spec, canon, pos, n, scratch);
            mine.emplace(g, g + n);
          }
      for (const auto& g : mine) ++shared_ngrams_[g];
    };
    for (const Task& t : tasks_) {
      if (t.constraint) continue;
      std::vector<std::vector<uint32_t>> canons;
      for (size_t q : t.seqs)
        canons.emplace_back(seqs_[q].canon.begin(), seqs_[q].canon.begin() + seqs_[q].first + 1);
      count(canons);
    }
    for (const format::Fact& f : ledger_) {
      std::vector<std::vector<uint32_t>> canons;
      for (const auto& p : f.prompts) canons.push_back(s_.Canonical(p.ids));
      count(canons);
    }
  }

  // After rows [before, row_ids_.size()) became trainable: the batch's indices, and those rows'
  // table values as their anchor and current value.
  void ExtendBatch(size_t before) {
    const format::Layout& l = s_.view->layout();
    const size_t D = l.row_dim;
    RowSource src(*s_.view, s_.table_layer);
    std::vector<float> fresh((row_ids_.size() - before) * D);
    table::GatherRowsF32(
        *s_.view, std::span<const uint64_t>(row_ids_.data() + before, row_ids_.size() - before),
        fresh.data());
    anchor_.insert(anchor_.end(), fresh.begin(), fresh.end());
    current_.insert(current_.end(), fresh.begin(), fresh.end());
    for (size_t b = 0; b < seqs_.size(); ++b) FillSequence(src, b, SeqRows(b), seqs_[b].ids.size());
    // The preservation contexts read the new trainable rows too.
    for (size_t w = 0; w < keep_windows_.size(); ++w)
      FillSequence(src, seqs_.size() + w, src.Rows(s_.Canonical(keep_windows_[w])),
                   keep_windows_[w].size());
  }

 private:
  struct Overlay {
    std::unordered_map<uint64_t, const float*> map;
  };

  Overlay MakeOverlay(const std::vector<float>& rows) const {
    Overlay ov;
    const size_t D = s_.view->layout().row_dim;
    for (size_t i = 0; i < row_ids_.size(); ++i) ov.map[row_ids_[i]] = rows.data() + i * D;
    return ov;
  }

  // Values as the table will store them.
  std::vector<float> Round(const std::vector<float>& rows) const {
    const format::Layout& l = s_.view->layout();
    const size_t D = l.row_dim;
    std::vector<float> out(rows.size());
    std::vector<uint8_t> enc(l.row_stride() + l.scale_stride());
    for (size_t i = 0; i * D < rows.size(); ++i) {
      base::EncodeRow(l.dtype, std::span<const float>(rows.data() + i * D, D), enc.data(),
                      enc.data() + l.row_stride());
      base::DecodeRow(l.dtype, enc.data(), enc.data() + l.row_stride(),
                      std::span<float>(out.data() + i * D, D));
    }
    return out;
  }

  // The target text of sequence q (what its greedy continuation must be).
  std::string TargetText(size_t q) const {
    const Task& t = tasks_[seqs_[q].task];
    if (t.constraint) return ledger_[t.ledger].target;
    // A text's target is what follows its first two tokens.
    return o_.entries[t.entry].text ? s_.tok->Decode(t.target_ids) : o_.entries[t.entry].target;
  }

  // Entries -> tasks and sequences (one per phrasing). Problems that make an entry unfittable are
  // collected (FILE:LINE) and thrown with throw_on_problems; --check reports them instead. Two
  // lines giving one prompt different targets, and a prompt of a ledger fact given another
  // target, are refused (the latter unless --force).
  void Tokenize(bool throw_on_problems, FitResult* check = nullptr) {
    const uint32_t V = s_.mc.vocab_size;
    base::LineProblems problems(o_.entries_path);
    auto add = [&](size_t line, const std::string& kind, std::string what) {
      if (check)
        check->pitfalls.push_back({line, kind, what, true});
      else
        problems.Add(line, std::move(what));
    };
    auto piece = [&](uint32_t id) { return Quote(s_.tok->Decode(std::vector<uint32_t>{id})); };
    // Each prompt's first line and target, to find contradictions in the file.
    std::map<std::vector<uint32_t>, std::pair<size_t, std::string>> seen_prompt;
    std::map<std::vector<uint32_t>, size_t> ledger_prompt;  // prompt ids -> ledger index
    for (size_t i = 0; i < ledger_.size(); ++i)
      for (const auto& p : ledger_[i].prompts) ledger_prompt.emplace(p.ids, i);
    for (size_t e = 0; e < o_.entries.size(); ++e) {
      const table::FitEntry& en = o_.entries[e];
      Task task;
      task.entry = e;
      std::vector<Seq> mine;
      bool ok = true;
      if (en.text) {
        // Position 0 reads no full n-gram (nothing to fit there): the first two tokens are the
        // cue, every later token a target.
        Seq q;
        q.ids = s_.tok->Encode(en.target);
        if (q.ids.size() < 3) {
          add(en.line, "too-short",
              "\"text\" is " + std::to_string(q.ids.size()) +
                  " token(s); a text to fit needs at least 3 (its first two tokens cue "
                  "the rest); to teach a continuation use \"prompt\" + \"target\"");
          continue;
        }
        task.target_ids.assign(q.ids.begin() + 2, q.ids.end());
        q.first = 1;
        mine.push_back(std::move(q));
      } else {
        task.target_ids = s_.tok->Encode(en.target);
        if (task.target_ids.empty()) {
          add(en.line, "empty-target", "\"target\" is empty after tokenization");
          continue;
        }
        for (const std::string& prompt : en.prompts) {
          Seq q;
          q.ids = s_.tok->Encode(prompt);
          if (q.ids.size() < 2) {
            add(en.line, "too-short",
                "the prompt " + Quote(prompt) + " is " + std::to_string(q.ids.size()) +
                    " token(s); a fact needs at least 2, because the rows fitted are "
                    "those of the n-grams ending at the prompt's last token");
            ok = false;
            continue;
          }
          // Contradictions: the same prompt with another target, in the file or the ledger.
          auto [it, fresh] = seen_prompt.try_emplace(q.ids, en.line, en.target);
          if (!fresh && it->second.second != en.target) {
            add(en.line, "same-prompt",
                "line " + std::to_string(it->second.first) + " gives the prompt " + Quote(prompt) +
                    " the target " + Quote(it->second.second) + ", this line " + Quote(en.target) +
                    ": one prompt cannot be fitted to two continuations; "
                    "keep one line");
            ok = false;
          }
          if (auto lp = ledger_prompt.find(q.ids); lp != ledger_prompt.end()) {
            const format::Fact& f = ledger_[lp->second];
            if (f.target != en.target && !o_.force) {
              add(en.line, "ledger-same-prompt",
                  "the table's ledger holds fact #" + std::to_string(f.id) + ", " + Quote(prompt) +
                      " -> " + Quote(f.target) + "; this line gives it " + Quote(en.target) +
                      ": fitting it would overwrite that fact (give --force "
                      "to overwrite it deliberately; 'engramctl facts --check' then reports it)");
              ok = false;
            }
          }
          q.first = q.ids.size() - 1;
          q.ids.insert(q.ids.end(), task.target_ids.begin(), task.target_ids.end());
          mine.push_back(std::move(q));
        }
      }
      for (const Seq& q : mine) {
        if (q.ids.size() > max_seq_) {
          add(en.line, "too-long",
              "prompt and target are " + std::to_string(q.ids.size()) +
                  " tokens, more than the model's context of " + std::to_string(max_seq_) +
                  "; shorten them");
          ok = false;
          break;
        }
        for (uint32_t id : q.ids)
          if (id >= V) {
            add(en.line, "out-of-vocabulary",
                "token id " + std::to_string(id) + " is outside the model's vocabulary");
            ok = false;
            break;
          }
      }
      for (uint32_t id : task.target_ids)
        if (!CanEmit(id)) {
          add(en.line, "never-emitted",
              "target token " + std::to_string(id) + " " + piece(id) +
                  " can never be emitted: the model's output row for it is all zero "
                  "(the token never occurs in its training text); spell the target with "
                  "tokens the model has seen (e.g. split an invented name into common "
                  "word pieces)");
          ok = false;
          break;
        }
      if (!ok && !check) continue;
      for (Seq& q : mine) {
        q.canon = s_.Canonical(q.ids);
        q.task = tasks_.size();
        task.seqs.push_back(seqs_.size());
        seqs_.push_back(std::move(q));
      }
      tasks_.push_back(std::move(task));
    }
    if (throw_on_problems)
      problems.ThrowIfAny([&](size_t n) {
        return std::to_string(n) + " entr" + (n == 1 ? "y" : "ies") + " of " + o_.entries_path +
               " cannot be fitted";
      });
  }

  // Whether the model can ever emit `token` (its output row is not all zero): the loaded model
  // when there is one, else (--check) the checkpoint's output head, read row by row.
  bool CanEmit(uint32_t token) {
    if (model_) return model_->CanEmit(token);
    if (auto it = can_emit_.find(token); it != can_emit_.end()) return it->second;
    if (!checkpoint_) checkpoint_ = format::Checkpoint::Open(s_.mc.dir);
    const std::string want = s_.mc.tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight";
    std::string name = checkpoint_->Has(want) ? want : "model." + want;
    auto [file, t] = checkpoint_->Get(name);
    const uint64_t row_bytes = t->numel() / s_.mc.vocab_size * format::StDTypeSize(t->dtype);
    auto data = file->Data(*t);
    bool nonzero = false;
    if (token < s_.mc.vocab_size)
      for (uint64_t i = 0; i < row_bytes && !nonzero; ++i) {
        // Zero in every float format is all-zero bits, except a negative zero's sign bit.
        const uint8_t byte = data[token * row_bytes + i];
        const size_t width = format::StDTypeSize(t->dtype);
        nonzero = (i % width == width - 1) ? (byte & 0x7F) != 0 : byte != 0;
      }
    can_emit_[token] = nonzero;
    return nonzero;
  }

  // Rows a sequence reads (RowSource::Rows), [k][t * per + c], cached per sequence.
  const std::vector<std::vector<uint64_t>>& SeqRows(size_t q) {
    if (seq_rows_.size() <= q) seq_rows_.resize(seqs_.size());
    if (seq_rows_[q].empty())
      seq_rows_[q] = RowSource(*s_.view, s_.table_layer).Rows(seqs_[q].canon);
    return seq_rows_[q];
  }

  // The trainable rows of sequences [q0, q1) (positions rule, --keep-frequent, --keep-busy),
  // their owners, and (for entries) the report counts. Rows already trainable stay so.
  void ChooseRowsOf(size_t q0, size_t q1, FitResult* res) {
    const format::Layout& l = s_.view->layout();
    const format::TableView& v = *s_.view;
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
    const size_t K = s_.table_layer.size();
    const bool stats = v.reader().has_stats();
    auto corpus_count = [&](uint64_t row) -> uint32_t {
      return stats && !v.Overlay(row) ? v.reader().Stats(row).owner_count : 0;
    };
    uint32_t scratch[hash::kMaxOrder];
    for (size_t b = q0; b < q1; ++b) {
      const Seq& q = seqs_[b];
      const Task& task = tasks_[q.task];
      FitEntryReport* rep = task.constraint ? nullptr : &res->entries[q.task];
      const bool text = !task.constraint && o_.entries[task.entry].text;
      const size_t n_tok = q.ids.size();
      const auto& rows = SeqRows(b);
      const size_t from = o_.positions == "all" ? 0 : q.first;
      std::map<std::string, uint32_t> generic;  // final n-grams that are corpus owners
      const std::vector<uint8_t> busy_kept = BusyKept(rows, from, n_tok, busy_);
      for (size_t k = 0; k < K; ++k) {
        const size_t li = s_.table_layer[k];
        for (size_t t = from; t + 1 < n_tok; ++t)
          for (size_t c = 0; c < per; ++c) {
            const uint32_t n = ColumnOrder(c, heads);
            if (t + 1 < n) continue;  // not a full n-gram
            const uint64_t row = rows[k][t * per + c];
            const uint32_t* g = hash::NgramAt(l.spec, q.canon, t, n, scratch);
            const uint32_t tag = hash::OwnerTag(g, n, l.owner_tag_seed);
            const uint32_t owner = v.Tag(row);
            const uint32_t count = corpus_count(row);
            // Where targets are predicted only the highest order's rows are trained: they belong
            // to the fact's own last words, where a lower order's n-gram ("ene was") is shared
            // with the near misses of its frame (issue 31). --positions all trains every order.
            const bool top_only = o_.positions == "last" && n < l.spec.max_order &&
                                  q.ids.size() - q.first > 1 && t + 1 >= l.spec.max_order;
            if (top_only) continue;
            if (rep && owner == tag && count > 0 && !text && t == q.first) {
              std::string words = s_.tok->Decode(
                  std::vector<uint32_t>(q.ids.begin() + (t + 1 - n), q.ids.begin() + (t + 1)));
              generic[words] = std::max(generic[words], count);
            }
            if (o_.keep_frequent && owner == tag && count >= o_.keep_frequent) {
              kept_.insert(row);
              if (rep) ++rep->rows_kept_frequent;
              continue;
            }
            if (busy_kept[k * n_tok * per + t * per + c]) {
              kept_.insert(row);
              if (rep) ++rep->rows_kept_busy;
              continue;
            }
            auto [it, fresh] = trainable_.try_emplace(row, static_cast<int64_t>(row_ids_.size()));
            if (fresh) {
              row_ids_.push_back(row);
              FitRow fr;
              fr.layer_id = l.spec.layer_ids[li];
              fr.head = static_cast<uint32_t>(c % heads);
              fr.canon.assign(g, g + n);
              fr.line = task.constraint ? 0 : o_.entries[task.entry].line;
              row_info_.push_back(std::move(fr));
            }
            if (!rep) continue;
            ++rep->rows;
            if (owner != tag && owner != hash::kNoOwner && o_.keep_frequent &&
                count >= o_.keep_frequent)
              ++rep->rows_frequent_owner;
          }
      }
      if (rep && b == task.seqs.front())
        for (const auto& [words, count] : generic)
          rep->warnings.push_back(
              "the prompt ends with " + Quote(words) + ", seen " + std::to_string(count) +
              " times in the build corpus: every prompt ending that way reads "
              "the fitted rows; reword so the last words carry the fact's own name");
    }
  }

  // The entries' reports and trainable rows.
  void ChooseRows(FitResult* res) {
    const bool stats = s_.view->reader().has_stats();
    // STATS counts the corpus reads of a row whatever the journal later wrote to it.
    busy_ = stats ? BusyReads(o_.keep_busy) : 0;
    res->busy_reads = busy_;
    for (const Task& t : tasks_) {
      const table::FitEntry& en = o_.entries[t.entry];
      const Seq& q = seqs_[t.seqs.front()];
      FitEntryReport rep;
      rep.line = en.line;
      rep.text = en.text;
      rep.prompt = en.text ? s_.tok->Decode(std::vector<uint32_t>(q.ids.begin(), q.ids.begin() + 2))
                           : en.prompts.front();
      rep.target = en.text ? s_.tok->Decode(t.target_ids) : en.target;
      rep.phrasings = en.prompts;
      rep.prompt_ids.assign(q.ids.begin(), q.ids.begin() + q.first + 1);
      rep.target_ids = t.target_ids;
      rep.target_tokens = t.target_ids.size();
      res->entries.push_back(std::move(rep));
    }
    ChooseRowsOf(0, seqs_.size(), res);
  }

  // Ledger facts whose sequences read a row this fit trains join the batch as constraints: their
  // own target-position rows become trainable too (the same rules), and the fit must leave them
  // holding. Entries that already are ledger facts (the same phrasing and target) are not added
  // twice.
  void AddLedgerConstraints(FitResult* res) {
    if (ledger_.empty() || row_ids_.empty()) return;
    std::set<std::pair<std::vector<uint32_t>, std::string>> batch;  // (prompt ids, target)
    for (const Task& t : tasks_)
      for (size_t q : t.seqs)
        batch.emplace(
            std::vector<uint32_t>(seqs_[q].ids.begin(), seqs_[q].ids.begin() + seqs_[q].first + 1),
            o_.entries[t.entry].target);
    const size_t q0 = seqs_.size();
    const size_t n_entry_tasks = tasks_.size();
    for (size_t i = 0; i < ledger_.size(); ++i) {
      const format::Fact& f = ledger_[i];
      if (f.text_entry) continue;  // a text is not asked again (its prompt is its own start)
      Task task;
      task.constraint = true;
      task.ledger = i;
      task.target_ids = f.target_ids;
      std::vector<Seq> mine;
      bool touches = false, duplicate = false;
      for (const format::FactPrompt& p : f.prompts) {
        duplicate = duplicate || batch.count({p.ids, f.target});
        Seq q;
        q.ids = p.ids;
        q.first = q.ids.size() - 1;
        q.ids.insert(q.ids.end(), f.target_ids.begin(), f.target_ids.end());
        if (q.ids.size() > max_seq_) continue;
        q.canon = s_.Canonical(q.ids);
        const auto rows = RowSource(*s_.view, s_.table_layer).Rows(q.canon);
        for (const auto& layer : rows)
          for (uint64_t r : layer) touches = touches || trainable_.count(r);
        mine.push_back(std::move(q));
      }
      if (!touches || duplicate || mine.empty()) continue;
      LedgerConstraint lc;
      lc.id = f.id;
      lc.prompt = f.prompts.front().text;
      lc.target = f.target;
      for (Seq& q : mine) {
        q.task = tasks_.size();
        task.seqs.push_back(seqs_.size());
        seqs_.push_back(std::move(q));
      }
      tasks_.push_back(std::move(task));
      res->ledger.push_back(std::move(lc));
    }
    if (seqs_.size() == q0) return;
    // Which entries share rows with each constraint (for the report and the refusal).
    std::unordered_map<uint64_t, std::set<size_t>> row_lines;  // row -> entry lines reading it
    for (size_t t = 0; t < n_entry_tasks; ++t)
      for (size_t q : tasks_[t].seqs)
        for (const auto& layer : SeqRows(q))
          for (uint64_t r : layer)
            if (trainable_.count(r)) row_lines[r].insert(o_.entries[tasks_[t].entry].line);
    ChooseRowsOf(q0, seqs_.size(), res);
    for (size_t t = n_entry_tasks; t < tasks_.size(); ++t)
      if (ledger_[tasks_[t].ledger].subject_rows) {
        tasks_[t].subject = true;
        for (size_t q : tasks_[t].seqs) AddSubjectRows(q);
      }
    for (size_t t = n_entry_tasks, c = 0; t < tasks_.size(); ++t, ++c) {
      std::set<size_t> lines;
      for (size_t q : tasks_[t].seqs)
        for (const auto& layer : SeqRows(q))
          for (uint64_t r : layer)
            if (auto it = row_lines.find(r); it != row_lines.end())
              lines.insert(it->second.begin(), it->second.end());
      res->ledger[c].lines.assign(lines.begin(), lines.end());
    }
  }

  // The batch FitRows trains on: every sequence's rows (frozen values and trainable indices),
  // once every trainable row is chosen (a row chosen for a later sequence is read by earlier ones
  // too), and the trainable rows' current values.
  void BuildBatch() {
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim;
    const size_t K = s_.table_layer.size();
    RowSource src(*s_.view, s_.table_layer);
    size_t T = 0;
    for (const Seq& q : seqs_) T = std::max(T, q.ids.size());
    const size_t B = seqs_.size();
    batch_.batch = static_cast<int>(B);
    batch_.T = static_cast<int>(T);
    batch_.row_dim = static_cast<int64_t>(D);
    batch_.tokens.assign(B * T, 0);
    batch_.targets.assign(B * T, -1);
    batch_.frozen.assign(K, std::vector<float>(B * T * per * D, 0.0f));
    batch_.train_index.assign(K, std::vector<int64_t>(B * T * per, -1));
    for (size_t b = 0; b < B; ++b) {
      const Seq& q = seqs_[b];
      const size_t n_tok = q.ids.size();
      for (size_t t = 0; t < n_tok; ++t) batch_.tokens[b * T + t] = q.ids[t];
      for (size_t t = q.first; t + 1 < n_tok; ++t) batch_.targets[b * T + t] = q.ids[t + 1];
      FillSequence(src, b, SeqRows(b), n_tok);
    }
    anchor_.resize(row_ids_.size() * D);
    table::GatherRowsF32(*s_.view, row_ids_, anchor_.data());
  }

  // Per entry: phrasings fitted, the greedy continuations, the ledger record; per constraint:
  // whether it held before and holds after.
  void Report(FitResult* res) {
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
    size_t c = 0;
    for (size_t ti = 0; ti < tasks_.size(); ++ti) {
      const Task& t = tasks_[ti];
      size_t ok = 0, ok_before = 0;
      float margin = static_cast<float>(o_.margin);
      for (size_t q : t.seqs) {
        ok += greedy_after_[q] == TargetText(q);
        ok_before += greedy_before_[q] == TargetText(q);
        margin = std::max(margin, seq_margin_[q]);
      }
      if (t.constraint) {
        LedgerConstraint& lc = res->ledger[c++];
        lc.held_before = ok_before == t.seqs.size();
        lc.holds_after = ok == t.seqs.size();
        continue;
      }
      FitEntryReport& r = res->entries[ti];
      const size_t q0 = t.seqs.front();
      r.logprob_before = lp_before_[q0];
      r.logprob_after = lp_after_[q0];
      r.greedy_before = greedy_before_[q0];
      r.greedy_after = greedy_after_[q0];
      for (size_t q : t.seqs) r.greedy_phrasings.push_back(greedy_after_[q]);
      r.phrasings_fitted = ok;
      r.fitted = ok == t.seqs.size();
      r.subject_rows = t.subject;
      // The ledger record: the rows it relies on are every row its phrasings read where a token
      // follows (a later fit touching any of them keeps it).
      const table::FitEntry& en = o_.entries[t.entry];
      format::Fact f;
      f.fitted = r.fitted;
      f.text_entry = en.text;
      f.subject_rows = t.subject;
      f.margin = margin;
      f.target = en.text ? s_.tok->Decode(t.target_ids) : en.target;
      f.target_ids = t.target_ids;
      f.line = en.line;
      std::set<uint64_t> rows;
      for (size_t j = 0; j < t.seqs.size(); ++j) {
        const size_t q = t.seqs[j];
        const Seq& s = seqs_[q];
        format::FactPrompt p;
        p.ids.assign(s.ids.begin(), s.ids.begin() + s.first + 1);
        p.text = en.text ? s_.tok->Decode(p.ids) : en.prompts[j];
        f.prompts.push_back(std::move(p));
        const auto& sr = SeqRows(q);
        for (size_t k = 0; k < sr.size(); ++k)
          for (size_t pos = 0; pos + 1 < s.ids.size(); ++pos)
            for (size_t col = 0; col < per; ++col)
              if (pos + 1 >= ColumnOrder(col, heads)) rows.insert(sr[k][pos * per + col]);
      }
      f.rows.assign(rows.begin(), rows.end());
      res->facts.push_back(std::move(f));
    }
    res->trainable_rows = row_ids_.size();
    // A row kept where one n-gram reads it may be trained where another does: it is trainable.
    for (uint64_t row : kept_) res->kept_rows += !trainable_.count(row);
  }

  // --check's findings in file order (the entry's tokens first).
  static void SortPitfalls(FitResult* res) {
    std::stable_sort(res->pitfalls.begin(), res->pitfalls.end(), [](const auto& a, const auto& b) {
      return a.line != b.line ? a.line < b.line : !a.problem && b.problem;
    });
  }

  // facts --check: each ledger fact's phrasings, greedy-decoded for its target's length.
  void AskLedger(FitResult* res) {
    base::Stopwatch sw;
    for (size_t i = 0; i < ledger_.size(); ++i) {
      const format::Fact& f = ledger_[i];
      FitResult::Asked a;
      a.fact = f;
      Task task;
      task.constraint = true;
      task.ledger = i;
      task.target_ids = f.target_ids;
      const std::string want = f.text_entry ? s_.tok->Decode(f.target_ids) : f.target;
      std::string first_greedy, failing_greedy;
      bool failed = false;
      for (const format::FactPrompt& p : f.prompts) {
        // A fact's phrasing is its prompt; a text's is its first two tokens (its cue).
        Seq q;
        q.ids = p.ids;
        q.first = f.text_entry ? 1 : q.ids.size() - 1;
        q.ids.insert(q.ids.end(), f.target_ids.begin(), f.target_ids.end());
        if (q.ids.size() > max_seq_) continue;
        q.canon = s_.Canonical(q.ids);
        q.task = tasks_.size();
        seqs_.push_back(std::move(q));
        double lp;
        std::string greedy;
        Evaluate(seqs_.size() - 1, {}, &lp, &greedy);
        if (&p == &f.prompts.front()) first_greedy = greedy;
        if (greedy == want) {
          ++a.phrasings_holding;
        } else if (!failed) {
          failed = true;
          failing_greedy = greedy;
        }
      }
      a.greedy = failed ? failing_greedy : first_greedy;
      tasks_.push_back(std::move(task));
      a.holds = a.phrasings_holding == f.prompts.size();
      res->asked.push_back(std::move(a));
      rep_.Progress("facts --check", i + 1, ledger_.size(), "facts");
    }
    rep_.ProgressDone("facts --check");
    res->fit_seconds = sw.Seconds();
  }

  // --check: every entry tokenized and every pitfall of fitting it reported, without a model.
  void Check(FitResult* res) {
    Tokenize(/*throw_on_problems=*/false, res);
    const format::Layout& l = s_.view->layout();
    const format::TableView& v = *s_.view;
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
    const bool stats = v.reader().has_stats();
    uint32_t scratch[hash::kMaxOrder];
    // Rows each ledger fact reads where its targets are predicted, for the shared-rows note.
    std::unordered_map<uint64_t, std::set<size_t>> ledger_rows;  // row -> ledger indices
    for (size_t i = 0; i < ledger_.size(); ++i)
      for (uint64_t r : ledger_[i].rows) ledger_rows[r].insert(i);
    for (const Task& t : tasks_) {
      const table::FitEntry& en = o_.entries[t.entry];
      std::string tokens;
      for (size_t qi : t.seqs) {
        const Seq& q = seqs_[qi];
        tokens += tokens.empty() ? "" : "; ";
        for (size_t i = 0; i < q.ids.size(); ++i)
          tokens += (i == q.first + 1 ? " | "
                     : i              ? " "
                                      : "") +
                    Quote(s_.tok->Decode(std::vector<uint32_t>{q.ids[i]}));
      }
      res->pitfalls.push_back({en.line, "tokens", tokens, false});
      if (!en.text && !en.target.empty() && en.target.front() != ' ' &&
          (en.prompts.front().empty() || en.prompts.front().back() != ' '))
        res->pitfalls.push_back({en.line, "no-leading-space",
                                 "the target " + Quote(en.target) +
                                     " does not start with a space, so its first "
                                     "token joins the prompt's last word (" +
                                     Quote(en.prompts.front() + en.target) + "); write " +
                                     Quote(" " + en.target) + " unless that is meant",
                                 true});
      std::set<size_t> shared;  // ledger facts whose rows this entry's targets read
      for (size_t qi : t.seqs) {
        const Seq& q = seqs_[qi];
        const auto& rows = SeqRows(qi);
        std::map<std::string, uint32_t> generic;
        for (size_t k = 0; k < rows.size(); ++k)
          for (size_t pos = q.first; pos + 1 < q.ids.size(); ++pos)
            for (size_t c = 0; c < per; ++c) {
              const uint32_t n = ColumnOrder(c, heads);
              if (pos + 1 < n) continue;
              const uint64_t row = rows[k][pos * per + c];
              if (auto it = ledger_rows.find(row); it != ledger_rows.end())
                shared.insert(it->second.begin(), it->second.end());
              if (en.text || pos != q.first || !stats || v.Overlay(row)) continue;
              const uint32_t* g = hash::NgramAt(l.spec, q.canon, pos, n, scratch);
              const uint32_t count = v.Tag(row) == hash::OwnerTag(g, n, l.owner_tag_seed)
                                         ? v.reader().Stats(row).owner_count
                                         : 0;
              if (count >= std::max<uint32_t>(o_.keep_frequent, 1)) {
                std::string words = s_.tok->Decode(std::vector<uint32_t>(
                    q.ids.begin() + (pos + 1 - n), q.ids.begin() + (pos + 1)));
                generic[words] = std::max(generic[words], count);
              }
            }
        for (const auto& [words, count] : generic)
          res->pitfalls.push_back(
              {en.line, "generic-ending",
               "the prompt ends with " + Quote(words) + ", seen " + std::to_string(count) +
                   " times in the build corpus: its rows are kept (--keep-frequent " +
                   std::to_string(o_.keep_frequent) +
                   "), so the fact must rest on the rows "
                   "of its rarer words; put the fact's own name last",
               true});
      }
      for (size_t i : shared) {
        const format::Fact& f = ledger_[i];
        if (f.target == en.target) continue;
        res->pitfalls.push_back(
            {en.line, "ledger-shared-rows",
             "it reads rows that ledger fact #" + std::to_string(f.id) + " (" +
                 Quote(f.prompts.front().text) + " -> " + Quote(f.target) +
                 ") relies on: the two are fitted jointly, and the append is refused if both "
                 "cannot hold (give the prompts different last words)",
             true});
      }
    }
  }

  // --keep-busy's threshold: `factor` times the median corpus reads (STATS total_count) of the
  // rows the corpus reads at all, over an even sample of at most 2^16 rows; 0 when off.
  uint32_t BusyReads(double factor) const {
    if (factor <= 0) return 0;
    const format::Layout& l = s_.view->layout();
    const uint64_t step = std::max<uint64_t>(1, l.total_rows >> 16);
    std::vector<uint32_t> reads;
    for (uint64_t r = 0; r < l.total_rows; r += step)
      if (uint32_t t = s_.view->reader().Stats(r).total_count) reads.push_back(t);
    if (reads.empty()) return 0;
    std::nth_element(reads.begin(), reads.begin() + reads.size() / 2, reads.end());
    const double t = std::ceil(factor * reads[reads.size() / 2]);
    return t >= 4294967295.0 ? 4294967295u : std::max<uint32_t>(1, static_cast<uint32_t>(t));
  }

  // Which of a sequence's rows --keep-busy leaves alone ([k][t][c] over n_tok positions): at each
  // position from `from` on, the rows read at least `busy` times, busiest first, but at most half
  // of the position's rows, so that every target token keeps rows to fit (a sentence of common
  // words reads mostly busy rows).
  std::vector<uint8_t> BusyKept(const std::vector<std::vector<uint64_t>>& rows, size_t from,
                                size_t n_tok, uint32_t busy) const {
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), heads = l.spec.n_heads, K = rows.size();
    std::vector<uint8_t> kept(K * n_tok * per, 0);
    if (!busy) return kept;
    for (size_t t = from; t + 1 < n_tok; ++t) {
      std::vector<std::pair<uint32_t, size_t>> cand;  // (reads, index into kept)
      size_t full = 0;
      for (size_t k = 0; k < K; ++k)
        for (size_t c = 0; c < per; ++c) {
          if (t + 1 < ColumnOrder(c, heads)) continue;  // not a full n-gram
          ++full;
          const uint32_t reads = s_.view->reader().Stats(rows[k][t * per + c]).total_count;
          if (reads >= busy) cand.emplace_back(reads, k * n_tok * per + t * per + c);
        }
      std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (size_t i = 0; i < cand.size() && i < full / 2; ++i) kept[cand[i].second] = 1;
    }
    return kept;
  }

  // Sequence b of batch_: the table's rows at its n_tok positions, and which of them are
  // trainable.
  void FillSequence(const RowSource& src, size_t b, const std::vector<std::vector<uint64_t>>& rows,
                    size_t n_tok) {
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim, T = static_cast<size_t>(batch_.T);
    for (size_t k = 0; k < rows.size(); ++k) {
      src.Fill(rows[k], 0, n_tok, {}, &batch_.frozen[k][b * T * per * D]);
      for (size_t i = 0; i < n_tok * per; ++i)
        if (auto it = trainable_.find(rows[k][i]); it != trainable_.end())
          batch_.train_index[k][b * T * per + i] = it->second;
    }
  }

  // Preservation contexts appended to batch_ (each keeps the unedited model's next-token
  // distribution at its last position): first each entry's kept near misses (PlanNearMisses),
  // then contexts of --preserve text that read trainable rows: a window of the batch's length
  // ending at such a position, taken when it reads a trainable row that fewer than
  // preserve_per_row earlier contexts read, until preserve_contexts are taken or the text ends.
  void AddPreservation(FitResult* res) {
    const size_t T = static_cast<size_t>(batch_.T);
    keep_windows_.clear();
    const size_t kept = static_cast<size_t>(std::max(0, o_.keep_near_misses));
    for (const auto& cands : nm_cands_)
      for (size_t i = 0; i < std::min(kept, cands.size()); ++i)
        keep_windows_.emplace_back(cands[i].end() - std::min(T, cands[i].size()), cands[i].end());
    res->near_misses_kept = keep_windows_.size();
    if (!o_.preserve.empty() && !row_ids_.empty() && o_.preserve_contexts > 0) {
      const format::Layout& l = s_.view->layout();
      const size_t per = l.spec.per_layer(), heads = l.spec.n_heads;
      const size_t K = s_.table_layer.size(), want = static_cast<size_t>(o_.preserve_contexts);
      RowSource src(*s_.view, s_.table_layer);
      std::unordered_map<uint64_t, int> covered;  // trainable row -> contexts that read it
      size_t taken = 0;
      base::ForEachLine(o_.preserve, 1 << 20, [&](size_t, std::string_view line, bool too_long) {
        if (taken >= want || too_long || line.empty()) return;
        std::vector<uint32_t> ids = s_.tok->Encode(std::string(line));
        auto rows = src.Rows(s_.Canonical(ids));
        auto trainable_at = [&](size_t t, auto&& f) {  // f(row) for each trainable row read at t
          for (size_t k = 0; k < K; ++k)
            for (size_t c = 0; c < per; ++c) {
              const uint64_t row = rows[k][t * per + c];
              if (t + 1 >= ColumnOrder(c, heads) && trainable_.count(row)) f(row);
            }
        };
        for (size_t t = 1; t < ids.size() && taken < want; ++t) {
          bool fresh = false;
          trainable_at(t, [&](uint64_t row) {
            auto it = covered.find(row);
            fresh |= it == covered.end() || it->second < o_.preserve_per_row;
          });
          if (!fresh) continue;
          trainable_at(t, [&](uint64_t row) { ++covered[row]; });
          keep_windows_.emplace_back(ids.begin() + (t + 1 > T ? t + 1 - T : 0),
                                     ids.begin() + t + 1);
          ++taken;
        }
      });
      res->preserve_contexts = taken;
      res->preserve_rows = covered.size();
    }
    if (keep_windows_.empty()) return;
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim, K = s_.table_layer.size();
    const size_t B0 = static_cast<size_t>(batch_.batch), B = B0 + keep_windows_.size();
    batch_.batch = static_cast<int>(B);
    batch_.preserve = static_cast<int>(keep_windows_.size());
    batch_.tokens.resize(B * T, 0);
    batch_.targets.resize(B * T, -1);
    for (size_t k = 0; k < K; ++k) {
      batch_.frozen[k].resize(B * T * per * D, 0.0f);
      batch_.train_index[k].resize(B * T * per, -1);
    }
    RowSource src(*s_.view, s_.table_layer);
    for (size_t w = 0; w < keep_windows_.size(); ++w) {
      const size_t b = B0 + w, n_tok = keep_windows_[w].size();
      for (size_t t = 0; t < n_tok; ++t) batch_.tokens[b * T + t] = keep_windows_[w][t];
      batch_.targets[b * T + n_tok - 1] = 0;  // the kept position
      FillSequence(src, b, src.Rows(s_.Canonical(keep_windows_[w])), n_tok);
    }
  }

  // One Transformer::Forward step of one sequence: positions [t0, t1) of ids (RoPE positions
  // t - pos_base), Engram rows from `rows` (RowSource::Rows of the sequence) under `overlay`;
  // with targets, out receives each position's negative log-likelihood instead of logits.
  void Step(const RowSource& src, const std::vector<std::vector<uint64_t>>& rows,
            const std::vector<uint32_t>& ids, size_t t0, size_t t1, size_t pos_base,
            const std::unordered_map<uint64_t, const float*>& overlay, const int64_t* targets,
            std::vector<float>* out) {
    const format::Layout& l = s_.view->layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim;
    std::vector<std::vector<float>> bufs(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      bufs[k].assign((t1 - t0) * per * D, 0.0f);
      src.Fill(rows[k], t0, t1, overlay, bufs[k].data());
    }
    std::vector<int64_t> tok(ids.begin() + t0, ids.begin() + t1), pos(t1 - t0);
    std::vector<uint8_t> valid(t1 - t0, 1);
    for (size_t t = t0; t < t1; ++t) pos[t - t0] = static_cast<int64_t>(t - pos_base);
    StepInput in;
    in.batch = 1;
    in.T = static_cast<int>(t1 - t0);
    in.tokens = tok.data();
    in.positions = pos.data();
    in.valid = valid.data();
    in.targets = targets;
    in.engram_rows = [&](size_t k) { return bufs[k].data(); };
    model_->Forward(in, out);
  }

  // Through Transformer::Forward (the pass `run` uses): the target's log-probability under
  // teacher forcing and the greedy continuation of as many tokens.
  void Evaluate(size_t e, const std::unordered_map<uint64_t, const float*>& overlay,
                double* logprob, std::string* greedy) {
    const Seq& q = seqs_[e];
    RowSource src(*s_.view, s_.table_layer);
    const size_t n = q.ids.size();
    auto forward = [&](const std::vector<uint32_t>& canon, size_t t0, size_t t1,
                       const std::vector<uint32_t>& ids, const std::vector<int64_t>* targets,
                       std::vector<float>* out) {
      Step(src, src.Rows(canon), ids, t0, t1, 0, overlay, targets ? targets->data() : nullptr, out);
    };
    std::vector<float> out;
    // Log-probability of the targets.
    std::vector<int64_t> tgt(n, -1);
    for (size_t t = q.first; t + 1 < n; ++t) tgt[t] = q.ids[t + 1];
    model_->Reset();
    forward(q.canon, 0, n, q.ids, &tgt, &out);
    double nll = 0;
    for (size_t t = q.first; t + 1 < n; ++t) nll += out[t];
    *logprob = -nll;
    *greedy =
        s_.tok->Decode(Greedy(std::vector<uint32_t>(q.ids.begin(), q.ids.begin() + q.first + 1),
                              n - 1 - q.first, overlay, nullptr));
  }

  // The greedy continuation of `want` tokens after `prompt` (token ids), through
  // Transformer::Forward with Engram rows under `overlay`; first_logits, when given, receives
  // the logits after the prompt.
  std::vector<uint32_t> Greedy(std::vector<uint32_t> ids, size_t want,
                               const std::unordered_map<uint64_t, const float*>& overlay,
                               std::vector<float>* first_logits) {
    RowSource src(*s_.view, s_.table_layer);
    std::vector<uint32_t> canon = s_.Canonical(ids), gen;
    std::vector<float> out;
    model_->Reset();
    size_t t0 = 0;
    const uint32_t V = s_.mc.vocab_size;
    while (gen.size() < want) {
      Step(src, src.Rows(canon), ids, t0, ids.size(), 0, overlay, nullptr, &out);
      if (first_logits && gen.empty()) first_logits->assign(out.begin(), out.begin() + V);
      uint32_t next =
          static_cast<uint32_t>(std::max_element(out.begin(), out.begin() + V) - out.begin());
      gen.push_back(next);
      if (s_.mc.eos_token_id >= 0 && next == static_cast<uint32_t>(s_.mc.eos_token_id)) break;
      t0 = ids.size();
      ids.push_back(next);
      canon.push_back(s_.Canonical(next));
      if (ids.size() > max_seq_) break;
    }
    return gen;
  }

  // Each prompt entry's near misses (issue 31): a prompt's frame is the leading and trailing
  // tokens it shares with the most other prompts (entries, ledger facts), the rest its subject.
  // An entry's near misses are its frame around other prompts' subjects that are not a fact's
  // prompt, in an order that depends on the entry (so that entries of one frame do not all take
  // the same subjects): the first o_.keep_near_misses are kept by the fit (AddPreservation), the
  // next kNearMisses are held out and asked after it (AskNearMisses).
  static constexpr size_t kNearMisses = 2;
  void PlanNearMisses() {
    using Ids = std::vector<uint32_t>;
    nm_task_.clear();
    nm_cands_.clear();
    std::vector<Ids> prompts;  // entries' first phrasings, then ledger facts' phrasings
    for (size_t t = 0; t < tasks_.size(); ++t) {
      if (tasks_[t].constraint || o_.entries[tasks_[t].entry].text) continue;
      const Seq& q = seqs_[tasks_[t].seqs.front()];
      prompts.emplace_back(q.ids.begin(), q.ids.begin() + q.first + 1);
      nm_task_.push_back(t);
    }
    const size_t n_entries = prompts.size();
    nm_cands_.resize(n_entries);
    if (n_entries == 0) return;
    for (const format::Fact& f : ledger_)
      for (const auto& p : f.prompts) prompts.push_back(p.ids);
    // Every phrasing of every fact is known: a near miss is never another fact's question.
    std::set<Ids> known(prompts.begin(), prompts.end());
    for (const Task& task : tasks_)
      if (!task.constraint)
        for (size_t q : task.seqs)
          known.emplace(seqs_[q].ids.begin(), seqs_[q].ids.begin() + seqs_[q].first + 1);
    struct Frame {
      size_t pre = 0, suf = 0;  // tokens shared before and after the subject
    };
    // A prompt's frame is the split (leading, trailing tokens shared) that the most other
    // prompts share with it, among splits covering at least half of it; ties go to the longer.
    // (The single closest prompt would often share part of the subject too: "Qu" of two
    // invented names.) Pairs need at least one entry: the cost grows with the batch times the
    // ledger, not with the ledger squared.
    std::vector<Frame> frames(prompts.size());
    for (size_t a = 0; a < prompts.size(); ++a) {
      std::map<std::pair<size_t, size_t>, size_t> splits;
      for (size_t b = 0; b < (a < n_entries ? prompts.size() : n_entries); ++b) {
        const Ids &x = prompts[a], &y = prompts[b];
        if (a == b || x == y) continue;
        const size_t m = std::min(x.size(), y.size());
        size_t pre = 0, suf = 0;
        while (pre < m && x[pre] == y[pre]) ++pre;
        while (suf < m - std::min(pre, m) && x[x.size() - 1 - suf] == y[y.size() - 1 - suf]) ++suf;
        if (pre == 0 || suf == 0 || pre + suf >= x.size() || pre + suf >= y.size()) continue;
        if (2 * (pre + suf) < x.size()) continue;
        ++splits[{pre, suf}];
      }
      size_t best = 0;
      for (const auto& [split, count] : splits)
        if (count > best ||
            (count == best && split.first + split.second > frames[a].pre + frames[a].suf)) {
          best = count;
          frames[a] = {split.first, split.second};
        }
    }
    std::vector<Ids> subjects;  // distinct, in prompt order
    {
      std::set<Ids> seen;
      for (size_t a = 0; a < prompts.size(); ++a) {
        if (frames[a].pre == 0) continue;
        Ids subj(prompts[a].begin() + frames[a].pre, prompts[a].end() - frames[a].suf);
        if (seen.insert(subj).second) subjects.push_back(std::move(subj));
      }
    }
    const size_t want = static_cast<size_t>(std::max(0, o_.keep_near_misses)) + kNearMisses;
    for (size_t a = 0; a < n_entries; ++a) {
      if (frames[a].pre == 0 || subjects.size() < 2) continue;
      const Ids& x = prompts[a];
      const Ids own(x.begin() + frames[a].pre, x.end() - frames[a].suf);
      for (size_t i = 0; i < subjects.size() && nm_cands_[a].size() < want; ++i) {
        const Ids& subj = subjects[(a * 7919 + i) % subjects.size()];
        if (subj == own) continue;
        Ids nm(x.begin(), x.begin() + frames[a].pre);
        nm.insert(nm.end(), subj.begin(), subj.end());
        nm.insert(nm.end(), x.end() - frames[a].suf, x.end());
        if (known.count(nm) || nm.size() > max_seq_) continue;
        nm_cands_[a].push_back(std::move(nm));
      }
    }
  }

  // The held-out near misses of every entry (FitEntryReport::near_misses), asked with the
  // table's rows and with the fitted ones (`overlay`).
  void AskNearMisses(const std::unordered_map<uint64_t, const float*>& overlay, FitResult* res) {
    using Ids = std::vector<uint32_t>;
    const size_t n_entries = nm_task_.size();
    if (n_entries == 0) return;
    const size_t kept = static_cast<size_t>(std::max(0, o_.keep_near_misses));
    // A near miss is asked for as many tokens as the longest target, and flagged when it now
    // starts with any target of the batch (its own fact's, or the fact whose subject it took).
    std::vector<std::string> targets;
    size_t want = 1;
    for (size_t a = 0; a < n_entries; ++a) {
      targets.push_back(TargetText(tasks_[nm_task_[a]].seqs.front()));
      want = std::max(want, tasks_[nm_task_[a]].target_ids.size());
    }
    const uint32_t V = s_.mc.vocab_size;
    std::vector<float> before, after;
    for (size_t a = 0; a < n_entries; ++a) {
      FitEntryReport& r = res->entries[nm_task_[a]];
      for (size_t i = kept; i < nm_cands_[a].size(); ++i) {
        const Ids& nm = nm_cands_[a][i];
        FitEntryReport::NearMiss m;
        m.prompt = s_.tok->Decode(nm);
        const Ids g0 = Greedy(nm, want, {}, &before), g1 = Greedy(nm, want, overlay, &after);
        m.greedy_before = s_.tok->Decode(g0);
        m.greedy_after = s_.tok->Decode(g1);
        m.first_token_changed = g0.empty() || g1.empty() || g0[0] != g1[0];
        for (const std::string& target : targets)
          if (!target.empty() && m.greedy_after.starts_with(target) &&
              !m.greedy_before.starts_with(target)) {
            m.says = target;
            break;
          }
        m.kl = CompareLogits(before.data(), after.data(), V).kl;
        ++res->near_misses;
        res->near_misses_changed += m.first_token_changed;
        res->near_misses_say_target += !m.says.empty();
        if (!m.says.empty())
          r.warnings.push_back("the near miss " + Quote(m.prompt) + " now says " + Quote(m.says) +
                               ", a fitted target: its last words read rows this fit changed; "
                               "fit it with its own target too, or reword the prompts so their "
                               "last words carry the subject");
        r.near_misses.push_back(std::move(m));
      }
    }
  }

  // Held-out perplexity with the table's rows and with the fitted ones.
  void CheckCorpus(const std::vector<float>& rounded, FitResult* res) {
    std::string text = base::ReadFileToString(o_.check_corpus, 1ull << 30);
    std::vector<uint32_t> ids = s_.tok->Encode(text);
    ENGRAM_CHECK(ids.size() >= 2, Code::kInvalidArgument,
                 o_.check_corpus << " holds fewer than 2 tokens; give held-out text to score");
    std::vector<uint32_t> canon = s_.Canonical(ids);
    RowSource src(*s_.view, s_.table_layer);
    auto rows = src.Rows(canon);
    Overlay ov = MakeOverlay(rounded);
    const size_t window = std::min<size_t>(max_seq_, 512);
    double nll[2] = {0, 0};
    uint64_t scored = 0;
    std::vector<float> out;
    const uint64_t total = ids.size();
    for (int pass = 0; pass < 2; ++pass) {
      const auto& overlay = pass == 0 ? std::unordered_map<uint64_t, const float*>{} : ov.map;
      for (size_t w0 = 0; w0 < ids.size(); w0 += window) {
        const size_t w1 = std::min(ids.size(), w0 + window);
        std::vector<int64_t> tgt(w1 - w0, -1);
        for (size_t t = w0; t + 1 < ids.size() && t < w1; ++t) tgt[t - w0] = ids[t + 1];
        model_->Reset();
        Step(src, rows, ids, w0, w1, w0, overlay, tgt.data(), &out);
        for (size_t t = w0; t < w1; ++t)
          if (tgt[t - w0] >= 0) {
            nll[pass] += out[t - w0];
            scored += pass == 0;
          }
        rep_.Progress(pass == 0 ? "check-corpus (table)" : "check-corpus (fitted)", w1, total,
                      "tokens");
      }
      rep_.ProgressDone(pass == 0 ? "check-corpus (table)" : "check-corpus (fitted)");
    }
    res->corpus_checked = true;
    res->corpus_tokens = scored;
    res->ppl_before = std::exp(nll[0] / static_cast<double>(scored));
    res->ppl_after = std::exp(nll[1] / static_cast<double>(scored));
  }

  const FitOptions& o_;
  base::Reporter& rep_;
  Setup s_;
  std::unique_ptr<Transformer> model_;
  size_t max_seq_ = 0;
  std::vector<Seq> seqs_;
  std::vector<Task> tasks_;
  std::vector<float> current_;     // the trainable rows' values now (rounded after each round)
  std::vector<float> seq_margin_;  // each sequence's margin (doubled where rounding broke it)
  std::vector<double> lp_before_, lp_after_;
  std::vector<std::string> greedy_before_, greedy_after_;
  std::map<std::vector<uint32_t>, int> shared_ngrams_;  // n-gram -> facts whose prompts hold it
  std::vector<format::Fact> ledger_;                    // the table's ledger before this fit
  std::vector<size_t> nm_task_;                         // PlanNearMisses: each prompt entry's task
  std::vector<std::vector<std::vector<uint32_t>>> nm_cands_;  // ... and its near misses
  std::vector<std::vector<uint32_t>> keep_windows_;  // preservation contexts, in batch order
  std::vector<std::vector<std::vector<uint64_t>>> seq_rows_;  // SeqRows' cache
  std::unordered_set<uint64_t> kept_;  // rows --keep-frequent or --keep-busy left alone somewhere
  uint32_t busy_ = 0;                  // --keep-busy's threshold in corpus reads
  std::unique_ptr<format::Checkpoint> checkpoint_;  // --check: the output head, read lazily
  std::unordered_map<uint32_t, bool> can_emit_;
  RowFitBatch batch_;
  std::vector<uint64_t> row_ids_;                    // trainable rows (global row ids)
  std::unordered_map<uint64_t, int64_t> trainable_;  // row id -> its index in row_ids_
  std::vector<FitRow> row_info_;                     // their owners
  std::vector<float> anchor_;                        // their values in the table
};

}  // namespace

FitResult FitImpl(const FitOptions& o, base::Reporter& rep) { return Fitter(o, rep).Run(); }

}  // namespace engram::model

extern "C" int engram_model_fit_v2(const engram::model::FitOptions* opts,
                                   engram::base::Reporter* reporter,
                                   engram::model::FitResult* result, std::string* error) {
  return engram::base::CatchAsStatus("the model module", error,
                                     [&] { *result = engram::model::FitImpl(*opts, *reporter); });
}

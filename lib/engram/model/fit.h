// `engramctl append --fit`: rows for facts and domain text computed through the frozen model.
// Torch-free like run.h: the fit runs in libengram_model.so (LoadFitPlugin); the rows it returns
// are written by table::Append like any other entries (schemas/append_entries.md, "Fitted
// entries").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/format/ledger.h"
#include "engram/model/run.h"
#include "engram/table/entries.h"

namespace engram::model {

struct FitOptions {
  RunOptions run;            // config_path, model_dir, table_path, threads are read
  std::string entries_path;  // for messages (FILE:LINE)
  std::vector<table::FitEntry> entries;
  std::string positions = "last";  // last: rows read where a target token is predicted; all: and
                                   // every prompt position
  int steps = 200;                 // optimiser steps per round of phase 1
  double lr = 0.3, l2 = 0;
  double margin = 1.0;  // every target token must lead the runner-up logit by this much
  int refits = 1;       // extra rounds when quantising to the table's dtype breaks a fact
  // Phase 2: entries that do not hold after phase 1 get the rows of their subject's rare n-grams
  // (the four positions before the prompt's last token) trainable too, and are fitted again with
  // every fact that holds as a constraint.
  bool subject_rows = true;
  int subject_steps = 300;
  int subject_refits = 2;
  // Rows that belong to the n-gram itself in the base and whose corpus count (STATS) is at least
  // this keep their values (0 = edit them too); the same count marks a displaced owner frequent.
  uint32_t keep_frequent = 100;
  std::string check_corpus;  // held-out text: perplexity before and after
  // Text (one document a line) whose contexts reading the trainable rows keep their next-token
  // distribution (KL to the unedited model, weight `keep`); "" = none. Up to preserve_contexts
  // contexts are taken, each reading a trainable row fewer than preserve_per_row earlier ones read.
  std::string preserve;
  double keep = 100;
  int preserve_contexts = 10000;
  int preserve_per_row = 4;
  // Near misses of each prompt entry (its frame around another fact's subject) that the fit
  // keeps as preservation contexts (KL weight `keep`); the next ones are held out and reported.
  // Off by default: at 300 facts 1 lowered the held-out near misses saying a fitted target by
  // a third but cost 6 points of efficacy and 1.8x the time (issue 31's note).
  int keep_near_misses = 0;
  // Rows the build corpus reads at least this many times the table's typical row does (STATS
  // total_count against the median over rows read at all) keep their values (0 = edit them too):
  // every n-gram hashed to a row reads its new value, and a busy row's edit reaches the most text.
  double keep_busy = 0;
  // Precision of the output head's products inside the optimiser loop: "f32", "bf16" (bf16
  // operands, f32 sums) or "auto" (bf16 where the CPU has AVX512-BF16 or AMX-BF16 instructions,
  // which run them about twice as fast). The checks before and after the fit always run in f32.
  std::string head_dtype = "auto";
  // After the fit, pull each target position's own rows back toward their old values as far as
  // every entry stays fitted by the margin (less collateral change, less slack for paraphrases).
  bool shrink = false;
  // The ledger: facts of earlier fits whose rows this fit touches are fitted jointly with it and
  // must still hold after it (FitResult::ledger). force: fit even when an entry gives a ledger
  // fact's prompt another target (the caller then writes even if a ledger fact stops holding).
  bool force = false;
  // --check: tokenize and report every pitfall (FitResult::pitfalls); load no model, fit nothing.
  bool check_only = false;
  // `facts --check`: no entries; ask every fact of the table's ledger again through the model
  // (FitResult::asked), fit nothing.
  bool ask_ledger = false;
};

struct FitRow {
  uint32_t layer_id = 0, head = 0;
  std::vector<uint32_t> canon;  // the n-gram (canonical ids, oldest first): the row's owner
  std::vector<float> value;     // row_dim values, already representable in the table's dtype
  size_t line = 0;              // the entry that chose it
};

struct FitEntryReport {
  size_t line = 0;
  bool text = false;
  std::string prompt, target;                 // prompt: the first phrasing
  std::vector<std::string> phrasings;         // every phrasing fitted (prompt first)
  std::vector<std::string> greedy_phrasings;  // greedy continuation of each, after the fit
  size_t phrasings_fitted = 0;                // phrasings whose greedy continuation is the target
  std::vector<uint32_t> prompt_ids, target_ids;  // of the first phrasing
  size_t target_tokens = 0;
  double logprob_before = 0, logprob_after = 0;  // of the target given the prompt (natural log)
  std::string greedy_before, greedy_after;       // greedy continuation of target_tokens tokens
  bool fitted = false;        // every phrasing's greedy continuation reproduces the target exactly
  bool subject_rows = false;  // phase 2 fitted it: its subject's rows are trainable too
  size_t rows = 0;            // trainable rows this entry reads where targets are predicted
  size_t rows_frequent_owner = 0;  // ... whose base owner is another n-gram, frequent in corpus
  size_t rows_kept_frequent = 0;   // rows of its own n-grams left alone (--keep-frequent)
  size_t rows_kept_busy = 0;       // rows left alone because the corpus reads them often
  // Near misses drawn automatically: the prompt's frame (the words it shares with another
  // fact's prompt, before and after) with another fact's subject (the words in between), where
  // that prompt is no fact of its own. Each is asked before and after the fit.
  struct NearMiss {
    std::string prompt;
    double kl = 0;  // KL(before || after) of the next-token distribution after the prompt
    bool first_token_changed = false;
    std::string says;  // a target of this batch its greedy continuation now starts with, or ""
    std::string greedy_before, greedy_after;
  };
  std::vector<NearMiss> near_misses;
  std::vector<std::string> warnings;
};

// A fact of the table's ledger that this fit touched: it was fitted jointly, as a constraint.
struct LedgerConstraint {
  uint64_t id = 0;
  std::string prompt, target;  // its first phrasing
  bool held_before = false;    // it held before this fit
  bool holds_after = false;    // ... and after it (rounded to the table's dtype)
  std::vector<size_t> lines;   // the entries whose rows it shares
};

// Something about an entry that fitting would trip on (--check), or a note.
struct FitPitfall {
  size_t line = 0;
  std::string kind;     // never-emitted | no-leading-space | generic-ending | same-prompt |
                        // ledger-same-prompt | ledger-shared-rows | too-long | tokens
  std::string message;  // what it is, with the values, and what to change
  bool problem = true;  // false: information (the entry's tokens)
};

struct FitResult {
  std::vector<FitRow> rows;  // rows whose stored value changes
  std::vector<FitEntryReport> entries;
  // One ledger record per entry (same order): phrasings, target, margin, the rows it relies on.
  std::vector<format::Fact> facts;
  std::vector<LedgerConstraint> ledger;  // ledger facts fitted jointly with this batch
  size_t ledger_facts = 0;               // facts in the table's ledger before this fit
  std::vector<FitPitfall> pitfalls;      // --check
  // ask_ledger: every ledger fact, held_before = it holds now; greedy: what the model says after
  // its first phrasing that fails (or the first).
  struct Asked {
    format::Fact fact;
    bool holds = false;
    size_t phrasings_holding = 0;
    std::string greedy;
  };
  std::vector<Asked> asked;
  size_t trainable_rows = 0, kept_rows = 0;  // kept: by --keep-frequent or --keep-busy
  uint32_t busy_reads = 0;  // --keep-busy's threshold in corpus reads a row (0 = off)
  int steps = 0, rounds = 0;
  double fit_seconds = 0;   // the optimisation and checks, without loading
  double loop_seconds = 0;  // the optimiser's loop alone (every round), without the checks
  std::string dtype;        // the table's row dtype the rows were quantised to
  bool corpus_checked = false;
  double ppl_before = 0, ppl_after = 0;
  uint64_t corpus_tokens = 0;
  size_t preserve_contexts = 0;  // corpus contexts the fit kept (--preserve)
  size_t preserve_rows = 0;      // trainable rows they read
  double preserve_kl = 0;        // their mean KL(unedited || fitted), before rounding
  double shrink_factor = 1;      // --shrink: mean factor left on the trainable rows' change
  // Near misses over every entry: asked, first token changed, now saying a fitted target.
  size_t near_misses = 0, near_misses_changed = 0, near_misses_say_target = 0;
  size_t near_misses_kept = 0;  // near misses the fit kept as preservation contexts
  // The share of text positions that read a row this fit writes, were n-grams hashed uniformly:
  // 1 - the product over sub-tables of (1 - written / rows).
  double exposure = 0;
  struct SubtableRows {
    uint32_t layer_id = 0, order = 0, head = 0;
    uint64_t written = 0, rows = 0;
  };
  std::vector<SubtableRows> written_by_subtable;  // sub-tables with a row written
};

// Returns a status (base/module_status.h): call it through base::CallModule.
using FitFn = int (*)(const FitOptions* opts, base::Reporter* reporter, FitResult* result,
                      std::string* error);
inline constexpr const char* kFitSymbol = "engram_model_fit_v2";

// Loads libengram_model.so as LoadModelPlugin does and returns its fit entry point.
FitFn LoadFitPlugin();

}  // namespace engram::model

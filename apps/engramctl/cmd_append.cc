// `engramctl append`: flags -> table::AppendOptions -> table::Append.
#include <CLI/CLI.hpp>
#include <cmath>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/base/units.h"
#include "engram/format/reader.h"
#include "engram/model/fit.h"
#include "engram/table/append.h"
#include "engram/table/entries.h"
#include "engram/table/fold.h"

namespace engramctl {

namespace {

using engram::base::JsonString;

std::string Num(double v, const char* fmt = "%.4g") {
  if (!std::isfinite(v)) return "null";
  char b[48];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string FitJson(const engram::model::FitResult& r) {
  std::string j = "{\"entries\":[";
  for (size_t i = 0; i < r.entries.size(); ++i) {
    const auto& e = r.entries[i];
    j += std::string(i ? "," : "") + "{\"line\":" + std::to_string(e.line) +
         ",\"kind\":" + (e.text ? "\"text\"" : "\"fact\"") + ",\"prompt\":" + JsonString(e.prompt) +
         ",\"target\":" + JsonString(e.target) +
         ",\"target_tokens\":" + std::to_string(e.target_tokens) +
         ",\"logprob_before\":" + Num(e.logprob_before, "%.6g") +
         ",\"logprob_after\":" + Num(e.logprob_after, "%.6g") +
         ",\"greedy_before\":" + JsonString(e.greedy_before) +
         ",\"greedy_after\":" + JsonString(e.greedy_after) +
         ",\"fitted\":" + (e.fitted ? "true" : "false") +
         ",\"phrasings\":" + std::to_string(e.phrasings.size()) +
         ",\"phrasings_fitted\":" + std::to_string(e.phrasings_fitted) +
         (i < r.facts.size() ? ",\"ledger_rows\":" + std::to_string(r.facts[i].rows.size()) : "") +
         ",\"rows\":" + std::to_string(e.rows) +
         ",\"rows_frequent_owner\":" + std::to_string(e.rows_frequent_owner) +
         ",\"rows_kept_frequent\":" + std::to_string(e.rows_kept_frequent) +
         ",\"rows_kept_busy\":" + std::to_string(e.rows_kept_busy) +
         ",\"subject_rows\":" + (e.subject_rows ? "true" : "false") + ",\"near_misses\":[";
    for (size_t k = 0; k < e.near_misses.size(); ++k) {
      const auto& m = e.near_misses[k];
      j += std::string(k ? "," : "") + "{\"prompt\":" + JsonString(m.prompt) +
           ",\"kl\":" + Num(m.kl, "%.4g") +
           ",\"first_token_changed\":" + (m.first_token_changed ? "true" : "false") +
           ",\"says\":" + JsonString(m.says) + ",\"greedy_before\":" + JsonString(m.greedy_before) +
           ",\"greedy_after\":" + JsonString(m.greedy_after) + "}";
    }
    j += "],\"warnings\":[";
    for (size_t k = 0; k < e.warnings.size(); ++k) j += (k ? "," : "") + JsonString(e.warnings[k]);
    j += "]}";
  }
  size_t fitted = 0;
  for (const auto& e : r.entries) fitted += e.fitted;
  j += "],\"fitted\":" + std::to_string(fitted) +
       ",\"trainable_rows\":" + std::to_string(r.trainable_rows) +
       ",\"kept_rows\":" + std::to_string(r.kept_rows) +
       ",\"busy_reads\":" + std::to_string(r.busy_reads) +
       ",\"rows_written\":" + std::to_string(r.rows.size()) +
       ",\"exposure\":{\"share\":" + Num(r.exposure, "%.6g") + ",\"subtables\":[" +
       [&] {
         std::string k;
         for (size_t i = 0; i < r.written_by_subtable.size(); ++i) {
           const auto& w = r.written_by_subtable[i];
           k += std::string(i ? "," : "") + "{\"layer\":" + std::to_string(w.layer_id) +
                ",\"order\":" + std::to_string(w.order) + ",\"head\":" + std::to_string(w.head) +
                ",\"written\":" + std::to_string(w.written) +
                ",\"rows\":" + std::to_string(w.rows) + "}";
         }
         return k;
       }() +
       "]}" + ",\"near_misses\":{\"asked\":" + std::to_string(r.near_misses) +
       ",\"changed\":" + std::to_string(r.near_misses_changed) +
       ",\"say_target\":" + std::to_string(r.near_misses_say_target) +
       ",\"kept\":" + std::to_string(r.near_misses_kept) + "}" +
       ",\"dtype\":" + JsonString(r.dtype) + ",\"steps\":" + std::to_string(r.steps) +
       ",\"rounds\":" + std::to_string(r.rounds) + ",\"seconds\":" + Num(r.fit_seconds, "%.3f") +
       ",\"loop_seconds\":" + Num(r.loop_seconds, "%.3f") +
       ",\"shrink_factor\":" + Num(r.shrink_factor, "%.4f") +
       ",\"ledger_facts\":" + std::to_string(r.ledger_facts) + ",\"ledger_kept\":[" +
       [&] {
         std::string k;
         for (size_t i = 0; i < r.ledger.size(); ++i) {
           const auto& c = r.ledger[i];
           k += std::string(i ? "," : "") + "{\"id\":" + std::to_string(c.id) +
                ",\"prompt\":" + JsonString(c.prompt) + ",\"target\":" + JsonString(c.target) +
                ",\"held_before\":" + (c.held_before ? "true" : "false") +
                ",\"holds_after\":" + (c.holds_after ? "true" : "false") + ",\"lines\":[";
           for (size_t j = 0; j < c.lines.size(); ++j)
             k += (j ? "," : "") + std::to_string(c.lines[j]);
           k += "]}";
         }
         return k;
       }() +
       "]" + ",\"preserve\":{\"contexts\":" + std::to_string(r.preserve_contexts) +
       ",\"rows\":" + std::to_string(r.preserve_rows) + ",\"kl\":" + Num(r.preserve_kl, "%.6g") +
       "}";
  if (r.corpus_checked)
    j += ",\"check_corpus\":{\"tokens\":" + std::to_string(r.corpus_tokens) +
         ",\"ppl_before\":" + Num(r.ppl_before, "%.6g") +
         ",\"ppl_after\":" + Num(r.ppl_after, "%.6g") +
         ",\"increase_pct\":" + Num(100.0 * (r.ppl_after / r.ppl_before - 1.0), "%.4f") + "}";
  return j + "}";
}

struct AppendFlags {
  engram::table::AppendOptions o;
  std::string config_path;
  bool no_wait = false, json = false;
  bool fit = false;
  engram::model::FitOptions fo;
  double max_ppl_increase = -1;
};

// append --fit --check: every entry's tokens and pitfalls; exit 3 when there is any pitfall.
void ReportCheck(const AppendFlags& f, const engram::model::FitResult& fr, StderrReporter& rep) {
  size_t problems = 0;
  std::string out;
  if (f.json) {
    std::string j = "{\"pitfalls\":[";
    bool first = true;
    for (const auto& p : fr.pitfalls) {
      problems += p.problem;
      j += std::string(first ? "" : ",") + "{\"line\":" + std::to_string(p.line) +
           ",\"kind\":" + JsonString(p.kind) + ",\"problem\":" + (p.problem ? "true" : "false") +
           ",\"message\":" + JsonString(p.message) + "}";
      first = false;
    }
    PrintStdout(j + "],\"problems\":" + std::to_string(problems) +
                ",\"ledger_facts\":" + std::to_string(fr.ledger_facts) + "}");
  } else {
    for (const auto& p : fr.pitfalls) {
      problems += p.problem;
      out += f.o.entries + ":" + std::to_string(p.line) + ": " + p.kind + ": " + p.message + "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    rep.Log(engram::base::LogLevel::kInfo,
            "check: " + std::to_string(problems) + " pitfall(s) in " + f.o.entries +
                " (the table's ledger holds " + std::to_string(fr.ledger_facts) +
                " facts); nothing was fitted or written");
  }
  if (problems) CommandExit() = kExitProblems;
}

// append --fit: fits rows for `entries` through the model plugin, reports, refuses a batch that
// costs more perplexity than allowed, and appends the changed rows.
void AppendFitted(AppendFlags& f, std::vector<engram::table::FitEntry> entries, bool has_config,
                  StderrReporter& rep) {
  std::vector<engram::table::PreparedEntry> fitted;
  ENGRAM_CHECK(has_config, engram::Code::kInvalidArgument,
               "entries to fit (" << f.o.entries
                                  << ") need the model: give --config cfg.toml "
                                     "with a [model] path");
  ENGRAM_CHECK(f.max_ppl_increase < 0 || !f.fo.check_corpus.empty(), engram::Code::kInvalidArgument,
               "--max-ppl-increase needs --check-corpus FILE (held-out text)");
  if (!f.o.dry_run && !f.fo.check_only) {
    // Refused before the fit, not after it: the facts need the ledger of a format 3.2 table.
    const auto r = engram::format::Reader::Open(f.o.table);
    ENGRAM_CHECK(r->header().required_flags & engram::format::kReqLedger,
                 engram::Code::kInvalidArgument,
                 f.o.table << " is a format " << r->header().version_major << "."
                           << r->header().version_minor
                           << " table, which has no fact ledger to record the facts of append "
                              "--fit (later fits keep ledger facts); run 'engramctl sort-buckets "
                           << f.o.table
                           << "' once to upgrade it to format 3.2; nothing was "
                              "written");
  }
  f.fo.run.config_path = f.config_path;
  f.fo.run.table_path = f.o.table;
  f.fo.entries_path = f.o.entries;
  f.fo.entries = std::move(entries);
  engram::model::FitResult fr;
  engram::base::CallModule(engram::model::LoadFitPlugin(), &f.fo, &rep, &fr);
  if (f.fo.check_only) {
    ReportCheck(f, fr, rep);
    return;
  }
  size_t ok = 0;
  for (const auto& e : fr.entries) ok += e.fitted;
  if (!f.json) {
    std::string out;
    for (const auto& e : fr.entries) {
      out += "line " + std::to_string(e.line) + ": " + (e.text ? "text " : "") +
             JsonString(e.prompt) + " -> " + JsonString(e.target) + ": log p " +
             Num(e.logprob_before, "%.2f") + " -> " + Num(e.logprob_after, "%.2f") + "; greedy " +
             JsonString(e.greedy_before) + " -> " + JsonString(e.greedy_after) +
             (e.fitted ? " (fitted)" : " (NOT fitted)") + "; " + std::to_string(e.rows) + " rows";
      if (e.phrasings.size() > 1)
        out += "; " + std::to_string(e.phrasings_fitted) + " of " +
               std::to_string(e.phrasings.size()) + " phrasings";
      if (e.rows_frequent_owner)
        out += ", " + std::to_string(e.rows_frequent_owner) + " taken from frequent corpus n-grams";
      if (e.rows_kept_frequent)
        out += ", " + std::to_string(e.rows_kept_frequent) + " kept (--keep-frequent)";
      if (e.rows_kept_busy) out += ", " + std::to_string(e.rows_kept_busy) + " kept (--keep-busy)";
      if (e.subject_rows) out += ", with its subject's rows (phase 2)";
      out += "\n";
      for (const auto& w : e.warnings) out += "  warning: " + w + "\n";
      for (size_t k = 1; k < e.phrasings.size(); ++k)
        out += "  phrasing " + JsonString(e.phrasings[k]) + ": greedy " +
               JsonString(k < e.greedy_phrasings.size() ? e.greedy_phrasings[k] : "") + "\n";
    }
    for (const auto& c : fr.ledger) {
      std::string lines;
      for (size_t l : c.lines) lines += (lines.empty() ? "" : ", ") + std::to_string(l);
      out += "ledger fact #" + std::to_string(c.id) + " " + JsonString(c.prompt) + " -> " +
             JsonString(c.target) + ": fitted jointly (it shares rows with line" +
             (c.lines.size() == 1 ? " " : "s ") + lines + "); " +
             (!c.held_before  ? "it did not hold before this fit"
              : c.holds_after ? "still holds"
                              : "NO LONGER HOLDS") +
             "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    char line[256];
    std::snprintf(line, sizeof line,
                  "fit: %zu of %zu entries reproduced after rounding to %s; %zu rows "
                  "trainable, %zu kept, %zu written; %d steps in %d round(s), %.1f s "
                  "(%.2f s per entry)",
                  ok, fr.entries.size(), fr.dtype.c_str(), fr.trainable_rows, fr.kept_rows,
                  fr.rows.size(), fr.steps, fr.rounds, fr.fit_seconds,
                  fr.fit_seconds / static_cast<double>(fr.entries.size()));
    rep.Log(engram::base::LogLevel::kInfo, line);
    if (fr.corpus_checked) {
      std::snprintf(line, sizeof line,
                    "held-out perplexity: %.3f -> %.3f (%+.3f%%) over %llu tokens of %s",
                    fr.ppl_before, fr.ppl_after, 100.0 * (fr.ppl_after / fr.ppl_before - 1),
                    static_cast<unsigned long long>(fr.corpus_tokens), f.fo.check_corpus.c_str());
      rep.Log(engram::base::LogLevel::kInfo, line);
    }
  }
  if (ok < fr.entries.size())
    rep.Log(engram::base::LogLevel::kWarning,
            std::to_string(fr.entries.size() - ok) +
                " entries are not reproduced by greedy decoding after the fit; raise "
                "--steps or --margin, use --positions all, lower --keep-busy or "
                "--keep-frequent, or reword them (see above)");
  // Facts of earlier appends that held before and would not after: refused unless --force.
  std::string broken;
  for (const auto& c : fr.ledger)
    if (c.held_before && !c.holds_after) {
      std::string lines;
      for (size_t l : c.lines) lines += (lines.empty() ? "" : ", ") + std::to_string(l);
      broken += "\n  ledger fact #" + std::to_string(c.id) + " " + JsonString(c.prompt) + " -> " +
                JsonString(c.target) + ", by line" + (c.lines.size() == 1 ? " " : "s ") + lines;
    }
  if (!broken.empty() && !f.fo.force) {
    if (f.json) PrintStdout("{\"fit\":" + FitJson(fr) + ",\"append\":null}");
    ENGRAM_THROW(engram::Code::kInvalidArgument,
                 "the fit would overwrite facts of the table's ledger (they share rows with "
                 "entries of "
                     << f.o.entries
                     << " and cannot both hold); nothing was written. Reword the entries so "
                        "their last words differ from those facts', or give --force to overwrite "
                        "them deliberately ('engramctl facts --check' then reports them):"
                     << broken);
  }
  const double rise = 100.0 * (fr.ppl_after / fr.ppl_before - 1.0);
  if (fr.corpus_checked && f.max_ppl_increase >= 0 && rise > f.max_ppl_increase) {
    if (f.json) PrintStdout("{\"fit\":" + FitJson(fr) + ",\"append\":null}");
    ENGRAM_THROW(engram::Code::kInvalidArgument,
                 "the fit raises held-out perplexity by "
                     << Num(rise, "%.3f") << "%, more than --max-ppl-increase "
                     << f.max_ppl_increase
                     << "; nothing was written (fit fewer entries at once, lower --margin, "
                        "or raise --keep-frequent's reach with a lower value)");
  }
  for (const auto& row : fr.rows) {
    engram::table::PreparedEntry pe;
    pe.line = row.line;
    pe.canon = row.canon;
    pe.value = row.value;
    pe.layer_id = row.layer_id;
    pe.head = row.head;
    fitted.push_back(std::move(pe));
  }
  if (fitted.empty() && fr.facts.empty()) {
    if (f.json)
      PrintStdout("{\"fit\":" + FitJson(fr) + ",\"append\":null}");
    else
      rep.Log(engram::base::LogLevel::kInfo, "nothing to append: no row's stored value changes");
    return;
  }
  f.o.prepared = &fitted;
  f.o.facts = &fr.facts;
  engram::table::AppendResult r = engram::table::Append(f.o, rep);
  if (f.json) {
    PrintStdout("{\"fit\":" + FitJson(fr) + ",\"append\":" + r.ToJson() + "}");
    return;
  }
  size_t frequent = 0;
  for (const auto& d : r.displaced) frequent += d.previous_count >= f.fo.keep_frequent;
  rep.Log(engram::base::LogLevel::kInfo,
          std::string(f.o.dry_run ? "would append " : "appended ") + std::to_string(r.records) +
              " fitted rows and " + std::to_string(r.facts) + " ledger fact" +
              (r.facts == 1 ? "" : "s") + " (" + engram::base::FormatBytes(r.bytes) + ") to " +
              f.o.table + "; " + std::to_string(r.displaced.size()) + " displaced another owner (" +
              std::to_string(frequent) + " seen >= " + std::to_string(f.fo.keep_frequent) +
              " times in the build corpus); " +
              (f.o.dry_run ? std::string("nothing was written (--dry-run)")
                           : std::to_string(r.journal_entries_before + r.records) +
                                 " entries now await 'engramctl sort-buckets'"));
  return;
}

}  // namespace

void AddAppendCommand(CLI::App& app) {
  auto f = std::make_shared<AppendFlags>();
  CLI::App* s = app.add_subcommand(
      "append",
      "Inject entries (n-gram -> row value) into a table's journal: O(entries), crash-safe");
  s->add_option("table", f->o.table, "Table file (default: [engram.table] path of --config)");
  s->add_option("--entries", f->o.entries,
                "Entries: .jsonl (schemas/append_entries.md) or .safetensors")
      ->required();
  s->add_option("--tokenizer", f->o.tokenizer_path,
                "The table's tokenizer.json, for \"text\" entries");
  s->add_option("--config", f->config_path, "config.toml naming the table and tokenizer");
  s->add_flag("--no-wait", f->no_wait, "Fail at once if another writer holds the table's lock");
  s->add_flag("--dry-run", f->o.dry_run, "Validate and report displaced owners; write nothing");
  s->add_flag("--json", f->json, "Print the result as JSON");
  s->add_flag("--fit", f->fit,
              "Compute the rows: fit entries {\"prompt\", \"target\"} (a fact) or {\"text\"} "
              "through the frozen model of --config (implied when no entry has a value)");
  s->add_option("--positions", f->fo.positions,
                "Fit: rows read where a target token is predicted (last) or at every position "
                "of the prompt too (all)")
      ->check(CLI::IsMember({"last", "all"}))
      ->capture_default_str();
  s->add_option("--steps", f->fo.steps,
                "Fit: most optimiser steps per round of phase 1 (the last words' rows)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  s->add_option("--lr", f->fo.lr, "Fit: the optimiser's learning rate")
      ->check(NumberIn(0, 100, false))
      ->capture_default_str();
  s->add_option("--l2", f->fo.l2, "Fit: penalty on the squared change of the rows")
      ->check(NumberIn(0, 1e12))
      ->capture_default_str();
  s->add_option("--margin", f->fo.margin,
                "Fit: a fact is fitted when each target token's logit leads the runner-up by this")
      ->check(NumberIn(0, 1e12))
      ->capture_default_str();
  s->add_option(
       "--refits", f->fo.refits,
       "Fit: extra rounds (margin doubled) when rounding to the table's dtype breaks a fact")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  s->add_option("--keep-frequent", f->fo.keep_frequent,
                "Fit: leave rows of n-grams seen at least this often in the build corpus "
                "untouched (0 = edit them too)")
      ->capture_default_str();
  s->add_option("--keep-busy", f->fo.keep_busy,
                "Fit: leave rows the build corpus reads at least this many times as often as "
                "the table's median row untouched (STATS; 0 = edit them too)")
      ->check(NumberIn(0, 1e12))
      ->capture_default_str();
  s->add_option("--head-dtype", f->fo.head_dtype,
                "Fit: the output head's products in the optimiser loop: bf16 operands with f32 "
                "sums (about 2x faster on CPUs with AVX512-BF16), f32, or auto (bf16 where the "
                "CPU has those instructions); the checks before and after always run in f32")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  s->add_flag("--shrink", f->fo.shrink,
              "Fit: afterwards pull each target position's own rows back toward their old "
              "values as far as every entry stays fitted by --margin (less collateral change; "
              "paraphrases keep less slack)");
  s->add_option("--preserve", f->fo.preserve,
                "Fit: text (one document a line, e.g. the build corpus) whose contexts that read "
                "the fitted rows keep their next-token distributions (KL to the unedited model)");
  s->add_option("--preserve-weight", f->fo.keep, "Fit: weight of the --preserve KL term")
      ->check(NumberIn(0, 1e12))
      ->capture_default_str();
  s->add_option("--preserve-contexts", f->fo.preserve_contexts,
                "Fit: most --preserve contexts taken (each holds the unedited model's next-token "
                "distribution: 4 bytes a vocabulary token)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  s->add_option("--preserve-per-row", f->fo.preserve_per_row,
                "Fit: a --preserve context is taken when it reads a fitted row fewer than this "
                "many earlier contexts read")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  s->add_option("--keep-near-misses", f->fo.keep_near_misses,
                "Fit: near misses per prompt entry (its frame around another fact's subject) "
                "that keep their next-token distribution during the fit (KL, weight "
                "--preserve-weight); the next two are asked afterwards and reported")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  s->add_option("--check-corpus", f->fo.check_corpus,
                "Fit: held-out text scored before and after (perplexity)");
  s->add_option("--max-ppl-increase", f->max_ppl_increase,
                "Fit: write nothing if --check-corpus perplexity rises by more than PCT percent")
      ->check(NumberIn(0, 1e12));
  s->add_option("-t,--threads", f->fo.run.threads, "Fit: threads (default: all cores)");
  s->add_flag("!--no-subject-rows", f->fo.subject_rows,
              "Fit: no phase 2 (entries that do not hold with their last words' rows are not "
              "fitted again with the rows of their subject's rare n-grams)");
  s->add_option("--subject-steps", f->fo.subject_steps,
                "Fit: most optimiser steps per round of phase 2 (subject rows)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  s->add_flag("--check", f->fo.check_only,
              "Fit: report each entry's tokens and every pitfall (target tokens the model never "
              "emits, a target without a leading space, generic final n-grams, contradictions "
              "within the file and with the table's fact ledger); fit nothing, exit 3 if any");
  s->add_flag("--force", f->fo.force,
              "Fit: write even when the fit overwrites facts of the table's ledger (a prompt "
              "given another target, or shared rows that cannot serve both)");
  s->callback([f] {
    StderrReporter rep;
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    if (cfg) {
      if (f->o.table.empty()) f->o.table = cfg->table.path;
      if (f->o.tokenizer_path.empty()) f->o.tokenizer_path = TokenizerFromConfig(*cfg);
    }
    ENGRAM_CHECK(!f->o.table.empty(), engram::Code::kInvalidArgument,
                 "no table given; name one or use --config");
    f->o.wait = !f->no_wait;
    // A fold killed half way is completed before anything else: before the model module maps the
    // table (a fit's reader would otherwise hold the lock the completion waits for).
    if (!f->o.dry_run) engram::table::CompleteInterruptedFold(f->o.table, f->o.wait, rep);
    const bool st = f->o.entries.size() > 12 &&
                    f->o.entries.compare(f->o.entries.size() - 12, 12, ".safetensors") == 0;
    ENGRAM_CHECK(!(st && f->fit), engram::Code::kInvalidArgument,
                 "--fit reads JSON Lines entries {\"prompt\", \"target\"} or {\"text\"}; "
                     << f->o.entries << " is a safetensors file of rows");
    // Entries are read twice (what kind they are, then the entries): a pipe is read once into a
    // temporary file first (--entries <(cmd)), and messages name that copy.
    engram::base::SpooledInput in(f->o.entries, 16ull << 30);
    if (in.spooled()) f->o.entries = in.path();
    if (!st) {
      auto ef = engram::table::ReadEntriesToFit(f->o.entries, f->fit);
      if (!ef.fit.empty()) {
        AppendFitted(*f, std::move(ef.fit), cfg.has_value(), rep);
        return;
      }
    }
    engram::table::AppendResult r = engram::table::Append(f->o, rep);
    if (f->json) {
      PrintStdout(r.ToJson());
      return;
    }
    rep.Log(engram::base::LogLevel::kInfo,
            std::string(f->o.dry_run ? "would append " : "appended ") + std::to_string(r.entries) +
                " entries as " + std::to_string(r.records) + " journal records (" +
                engram::base::FormatBytes(r.bytes) + ") to " + f->o.table + " in " +
                engram::base::FormatSeconds(r.seconds) + "; " +
                (f->o.dry_run ? std::string("nothing was written (--dry-run)")
                              : std::to_string(r.journal_entries_before + r.records) +
                                    " entries now await 'engramctl sort-buckets'"));
    std::string out;
    for (const auto& n : r.ngrams) {
      std::string texts, tokens, ids, canon;
      for (size_t k = 0; k < n.texts.size(); ++k) {
        texts += " " + JsonString(n.texts[k]);
        tokens += " " + JsonString(n.tokens[k]);
        ids += " " + std::to_string(n.ids[k]);
        canon += " " + std::to_string(n.canon[k]);
      }
      out += "line " + std::to_string(n.line) + ": n-gram" + texts + " (tokens" + tokens + "; ids" +
             ids + "; canonical" + canon + ")\n";
    }
    if (r.ngrams.size() < r.entries && !r.ngrams.empty())
      out += "(the n-grams of the first " + std::to_string(r.ngrams.size()) + " of " +
             std::to_string(r.entries) + " entries)\n";
    for (const auto& d : r.displaced) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "%08x", d.previous_tag);
      out += "displaced: layer " + std::to_string(d.layer_id) + " order " +
             std::to_string(d.order) + " head " + std::to_string(d.head) + " bucket " +
             std::to_string(d.bucket) + ": previous owner " + tag;
      if (!d.previous_ids.empty()) {
        out += " (appended n-gram";
        for (const auto& t : d.previous_texts) out += " " + JsonString(t);
        out += d.previous_texts.empty() ? "" : ", canonical";
        for (uint32_t id : d.previous_ids) out += " " + std::to_string(id);
        out += ")";
      } else if (d.previous_count) {
        out += " (seen " + std::to_string(d.previous_count) + " times in the build corpus)";
      }
      out += ", by entry on line " + std::to_string(d.entry_line) + "\n";
    }
    if (!out.empty()) std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace engramctl

// `engramctl quantize`: flags -> table::Quantize, then, with --check-corpus, the quality gate: the
// model scores the corpus with both tables (the model module compares the next-token
// distributions) and the converted table is kept only within --max-kl / --max-ppl-increase.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/interrupt.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/base/reporter.h"
#include "engram/base/units.h"
#include "engram/format/view.h"
#include "engram/model/run.h"
#include "engram/table/hotset.h"
#include "engram/table/quantize.h"

namespace engramctl {

namespace {

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// What the gate measured: the model on the corpus with each table, and the rows it reads.
struct CheckReport {
  uint64_t documents = 0, tokens = 0;
  double mean_kl = 0, p99_kl = 0, max_kl = 0, top1 = 0;
  double ppl_source = 0, ppl_converted = 0, ppl_increase_pct = 0;
  engram::table::RowError read_rows;  // over the distinct rows the corpus reads
};

CheckReport RunCheck(const std::string& config_path, const std::string& source,
                     const std::string& converted, const std::string& corpus, uint64_t max_tokens,
                     int threads, const engram::config::Config& cfg, engram::base::Reporter& rep) {
  CheckReport c;
  engram::format::ViewOptions vo;
  vo.deterministic_addressing = false;
  auto src = engram::format::TableView::Open(source, vo);
  auto out = engram::format::TableView::Open(converted, vo);
  // The rows the corpus reads, and their error.
  const std::vector<std::vector<uint32_t>> docs =
      ReadDocuments("", corpus, src->layout(), TokenizerFromConfig(cfg), max_tokens);
  const std::vector<uint64_t> trace = engram::table::RowTrace(src->layout(), docs);
  c.read_rows = engram::table::CompareRows(*src, *out, trace);
  // The model, both tables, the same documents (as text: the run tokenizes them again).
  engram::model::RunOptions o;
  o.config_path = config_path;
  o.table_path = source;
  o.compare_table_path = converted;
  o.perplexity = true;
  o.read_journal = true;  // the source as its readers see it, journal included
  o.threads = threads;
  // The documents the row trace read (whole documents up to max_tokens): the first non-empty lines.
  const size_t n_docs = static_cast<size_t>(
      std::count_if(docs.begin(), docs.end(), [](const auto& d) { return !d.empty(); }));
  engram::base::ForEachLine(corpus, 64u << 20, [&](size_t, std::string_view line, bool) {
    if (o.prompts.size() < n_docs && !line.empty()) o.prompts.emplace_back(line);
  });
  ENGRAM_CHECK(!o.prompts.empty(), engram::Code::kInvalidArgument,
               corpus << ": no text to check with (one document per line)");
  engram::model::RunResult r;
  WarningsOnly quiet(rep);
  engram::base::CallModule(engram::model::LoadModelPlugin(), &o, &quiet, &r);
  const auto& cmp = r.compare;
  ENGRAM_CHECK(cmp.tokens > 0, engram::Code::kInvalidArgument,
               corpus << ": no position was scored (documents need at least two tokens)");
  c.documents = o.prompts.size();
  c.tokens = cmp.tokens;
  std::vector<float> kl = cmp.kl;
  double sum = 0;
  for (float v : kl) sum += v;
  c.mean_kl = sum / static_cast<double>(kl.size());
  std::sort(kl.begin(), kl.end());
  c.p99_kl =
      kl[std::min(kl.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(kl.size())))];
  c.max_kl = kl.back();
  c.top1 = static_cast<double>(cmp.top1_agree) / static_cast<double>(cmp.tokens);
  c.ppl_source = std::exp(cmp.nll / static_cast<double>(cmp.tokens));
  c.ppl_converted = std::exp(cmp.compare_nll / static_cast<double>(cmp.tokens));
  c.ppl_increase_pct = 100.0 * (c.ppl_converted / c.ppl_source - 1.0);
  return c;
}

// Removes a staged file unless released (the gate refused, or an error or signal stopped us).
class StagedFile {
 public:
  explicit StagedFile(std::string path) : path_(std::move(path)) {}
  ~StagedFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  const std::string& path() const noexcept { return path_; }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  struct Flags {
    engram::table::QuantizeOptions o;
    std::string dtype, config_path, check_corpus;
    double max_kl = -1, max_ppl_increase = -1;
    uint64_t check_max_tokens = 0;
    bool force = false, json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "quantize",
      "Convert a table's rows to another dtype (f32, bf16, f16, fp8-e4m3, int8, int4) as a new "
      "file; with --check-corpus, measure what the conversion costs the model and refuse a table "
      "that costs more than --max-kl / --max-ppl-increase");
  AddTableFlags(s, &f->o.input, &f->config_path);
  s->add_option("-o,--output", f->o.output, "The converted table (a new file)")->required();
  s->add_option("--dtype", f->dtype, "Target dtype: f32 | bf16 | f16 | fp8-e4m3 | int8 | int4")
      ->required();
  s->add_flag("--force", f->force, "Replace OUT when it exists");
  s->add_option("--check-corpus", f->check_corpus,
                "Text, one document per line: run the model (--config) on it with both tables "
                "and report KL, top-1 agreement, perplexity change and row error");
  s->add_option("--check-max-tokens", f->check_max_tokens,
                "Check with the first documents of the corpus, about N tokens (default: all)");
  s->add_option("--max-kl", f->max_kl,
                "Refuse (exit 3, nothing written) when the mean KL per token exceeds X nats");
  s->add_option("--max-ppl-increase", f->max_ppl_increase,
                "Refuse (exit 3, nothing written) when perplexity rises by more than PCT percent");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--json", f->json, "Print the result as JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->o.input, f->config_path, rep);
    auto dt = engram::base::ParseDType(f->dtype);
    ENGRAM_CHECK(dt.has_value(), engram::Code::kInvalidArgument,
                 "--dtype " << f->dtype << ": use f32, bf16, f16, fp8-e4m3, int8 or int4");
    f->o.dtype = *dt;
    const bool check = !f->check_corpus.empty();
    ENGRAM_CHECK(check || (f->max_kl < 0 && f->max_ppl_increase < 0),
                 engram::Code::kInvalidArgument,
                 "--max-kl and --max-ppl-increase need --check-corpus FILE (and --config)");
    ENGRAM_CHECK(!check || !f->config_path.empty(), engram::Code::kInvalidArgument,
                 "--check-corpus runs the model: give --config cfg.toml");
    ENGRAM_CHECK(f->force || ::access(f->o.output.c_str(), F_OK) != 0,
                 engram::Code::kInvalidArgument,
                 f->o.output << " exists; choose another -o or add --force to replace it");
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    const std::string final_out = f->o.output;
    // With the gate, the table is written beside OUT and moved there only when it passes.
    StagedFile staged(check ? final_out + ".check." + std::to_string(::getpid()) : "");
    if (check) f->o.output = staged.path();
    engram::base::CatchInterrupts();
    engram::table::QuantizeResult r;
    try {
      r = engram::table::Quantize(f->o, rep);
    } catch (const engram::base::Interrupted& e) {
      std::fprintf(stderr, "engramctl quantize: %s: interrupted; nothing written\n",
                   final_out.c_str());
      CommandExit() = 128 + e.signal();
      return;
    }
    CheckReport c;
    std::string refused;
    if (check) {
      c = RunCheck(f->config_path, f->o.input, staged.path(), f->check_corpus,
                   f->check_max_tokens ? f->check_max_tokens : UINT64_MAX, f->o.threads, *cfg, rep);
      if (f->max_kl >= 0 && c.mean_kl > f->max_kl)
        refused = "mean KL " + Fmt("%.3g", c.mean_kl) + " exceeds --max-kl " + Fmt("%g", f->max_kl);
      else if (f->max_ppl_increase >= 0 && c.ppl_increase_pct > f->max_ppl_increase)
        refused = "perplexity rises " + Fmt("%.3f", c.ppl_increase_pct) +
                  "%, more than --max-ppl-increase " + Fmt("%g", f->max_ppl_increase) + "%";
      if (refused.empty()) {
        ENGRAM_CHECK(
            ::rename(staged.path().c_str(), final_out.c_str()) == 0, engram::Code::kIo,
            "rename " << staged.path() << " to " << final_out << ": " << std::strerror(errno));
        staged.Release();
      }
    }
    using engram::base::FormatBytes;
    const std::string from(engram::base::DTypeName(r.from)), to(engram::base::DTypeName(r.to));
    if (f->json) {
      using engram::base::JsonString;
      auto num = [](double v) { return Fmt("%.9g", v); };
      std::string j =
          "{\"input\":" + JsonString(f->o.input) + ",\"output\":" + JsonString(final_out) +
          ",\"written\":" + (refused.empty() ? "true" : "false") +
          ",\"refused\":" + (refused.empty() ? "null" : JsonString(refused)) +
          ",\"from\":" + JsonString(from) + ",\"to\":" + JsonString(to) +
          ",\"rows\":" + std::to_string(r.rows) +
          ",\"input_bytes\":" + std::to_string(r.input_bytes) +
          ",\"output_bytes\":" + std::to_string(r.output_bytes) +
          ",\"journal_entries_folded\":" + std::to_string(r.journal_entries) +
          ",\"facts\":" + std::to_string(r.facts) + ",\"row_rel_l2_all\":" + num(r.error.rel_l2()) +
          ",\"row_max_abs_error\":" + num(r.error.max_abs) +
          ",\"seconds\":" + Fmt("%.3f", r.seconds);
      if (check)
        j += ",\"check\":{\"documents\":" + std::to_string(c.documents) +
             ",\"tokens\":" + std::to_string(c.tokens) + ",\"kl_mean\":" + num(c.mean_kl) +
             ",\"kl_p99\":" + num(c.p99_kl) + ",\"kl_max\":" + num(c.max_kl) +
             ",\"top1_agreement\":" + num(c.top1) + ",\"perplexity_source\":" + num(c.ppl_source) +
             ",\"perplexity\":" + num(c.ppl_converted) +
             ",\"perplexity_increase_pct\":" + num(c.ppl_increase_pct) +
             ",\"read_rows\":" + std::to_string(c.read_rows.rows) +
             ",\"row_rel_l2_read\":" + num(c.read_rows.rel_l2()) + "}";
      PrintStdout(j + "}");
    } else {
      std::string line = f->o.input + " (" + from + ", " + FormatBytes(r.input_bytes) + ") -> " +
                         final_out + " (" + to + ", " + FormatBytes(r.output_bytes) +
                         "): " + std::to_string(r.rows) + " rows in " +
                         engram::base::FormatSeconds(r.seconds);
      if (r.journal_entries)
        line += ", " + std::to_string(r.journal_entries) + " journal entries folded in";
      PrintStdout((refused.empty() ? "quantized " : "checked ") + line);
      PrintStdout("row error (relative L2): all rows " + Fmt("%.3g", r.error.rel_l2()) +
                  (check ? ", the " + std::to_string(c.read_rows.rows) + " rows the corpus reads " +
                               Fmt("%.3g", c.read_rows.rel_l2())
                         : std::string()) +
                  "; largest |error| " + Fmt("%.3g", r.error.max_abs));
      if (check)
        PrintStdout("check: " + std::to_string(c.tokens) + " tokens in " +
                    std::to_string(c.documents) + (c.documents == 1 ? " document" : " documents") +
                    ": KL mean " + Fmt("%.3g", c.mean_kl) + ", p99 " + Fmt("%.3g", c.p99_kl) +
                    ", max " + Fmt("%.3g", c.max_kl) + " nats; top-1 agreement " +
                    Fmt("%.2f", 100 * c.top1) + "%; perplexity " + Fmt("%.3f", c.ppl_source) +
                    " -> " + Fmt("%.3f", c.ppl_converted) + " (" +
                    Fmt("%+.3f", c.ppl_increase_pct) + "%)");
      if (!refused.empty())
        PrintStdout("refused: " + refused + "; nothing written to " + final_out);
    }
    if (!refused.empty()) CommandExit() = kExitProblems;
  });
}

}  // namespace engramctl

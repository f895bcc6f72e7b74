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
#include "quality_check.h"

namespace engramctl {

namespace {

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
    std::string dtype, config_path;
    CheckFlags check;
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
  AddCheckFlags(s, &f->check, "Refuse (exit 3, nothing written)");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--json", f->json, "Print the result as JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->o.input, f->config_path, rep);
    auto dt = engram::base::ParseDType(f->dtype);
    ENGRAM_CHECK(dt.has_value(), engram::Code::kInvalidArgument,
                 "--dtype " << f->dtype << ": use f32, bf16, f16, fp8-e4m3, int8 or int4");
    f->o.dtype = *dt;
    const bool check = !f->check.corpus.empty();
    ENGRAM_CHECK(check || (f->check.max_kl < 0 && f->check.max_ppl_increase < 0),
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
      c = RunCheck(f->config_path, f->o.input, staged.path(), f->check.corpus,
                   f->check.max_tokens ? f->check.max_tokens : UINT64_MAX, f->o.threads, *cfg, rep);
      // A signal during the model's run (which does not stop for it) still stops the command here,
      // before anything is moved into place.
      if (const int sig = engram::base::PendingInterrupt()) {
        std::fprintf(stderr, "engramctl quantize: %s: interrupted; nothing written\n",
                     final_out.c_str());
        CommandExit() = 128 + sig;
        return;
      }
      refused = c.Exceeds(f->check.max_kl, f->check.max_ppl_increase);
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
      if (check) PrintStdout(c.Line());
      if (!refused.empty())
        PrintStdout("refused: " + refused + "; nothing written to " + final_out);
    }
    if (!refused.empty()) CommandExit() = kExitProblems;
  });
}

}  // namespace engramctl

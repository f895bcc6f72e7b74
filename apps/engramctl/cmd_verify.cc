// `engramctl verify`: flags -> table::Verify; exit 0 when deployable, 3 when problems are found.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/model/fit.h"
#include "engram/model/run.h"
#include "engram/table/ledger.h"
#include "engram/table/verify.h"
#include "quality_check.h"

namespace engramctl {

namespace {

// verify --config on a table with a fact ledger: every fact asked again through the model (as
// `facts --check`); each one that no longer holds is a problem.
void CheckLedger(const std::string& table, const std::string& config_path, int threads,
                 engram::base::Reporter& rep, engram::table::VerifyReport* r) {
  size_t n = 0;
  try {
    n = engram::table::ReadLedger(table).size();
  } catch (const engram::Error&) {
    return;  // the table itself is damaged: Verify reported it
  }
  if (n == 0) return;
  engram::model::FitOptions fo;
  fo.run.config_path = config_path;
  fo.run.table_path = table;
  fo.run.threads = threads;
  fo.ask_ledger = true;
  engram::model::FitResult fr;
  WarningsOnly quiet(rep);
  try {
    engram::base::CallModule(engram::model::LoadFitPlugin(), &fo, &quiet, &fr);
  } catch (const engram::Error& e) {
    r->problems.push_back({0, 0, "ledger", e.code(),
                           "the table's " + std::to_string(n) +
                               " ledger facts could not be asked through the model: " + e.what()});
    return;
  }
  size_t holding = 0;
  for (const auto& a : fr.asked) {
    holding += a.holds;
    if (!a.holds)
      r->problems.push_back(
          {0, 0, "ledger fact #" + std::to_string(a.fact.id), engram::Code::kInvalidArgument,
           engram::base::JsonString(a.fact.prompts.front().text) + " -> " +
               engram::base::JsonString(a.fact.target) + " no longer holds: the model says " +
               engram::base::JsonString(a.greedy) + "; append it again with --fit"});
  }
  r->notes.push_back("ledger: " + std::to_string(holding) + " of " +
                     std::to_string(fr.asked.size()) +
                     " facts hold ('engramctl facts --check' lists them)");
}

// verify --config with a config that names a model ([model] path) or a device other than the
// CPU: every problem run or serve would refuse it for (device, model directory, [moe] against
// the model's config.json, tokenizer, the table against the model), asked of the model module.
void CheckModelSetup(const engram::config::Config& cfg, const std::string& config_path,
                     const std::string& table, engram::table::VerifyReport* r) {
  if (cfg.model.path.empty() && cfg.model.device == "cpu") return;
  engram::model::RunOptions ro;
  ro.config_path = config_path;
  ro.table_path = table;
  std::vector<std::string> problems;
  engram::model::SetupProblemsFn fn = nullptr;
  try {
    fn = engram::model::LoadSetupProblemsPlugin();
  } catch (const engram::Error& e) {
    // A build without libtorch (-DENGRAM_WITH_TORCH=OFF) checks tables for other engines: say
    // what was left unchecked rather than fail the gate on it.
    if (e.code() != engram::Code::kInvalidArgument) throw;
    const std::string what = e.what();
    r->notes.push_back("config model: not checked: " + what.substr(0, what.find(';')));
    return;
  }
  try {
    engram::base::CallModule(fn, &ro, &problems);
  } catch (const engram::Error& e) {
    r->problems.push_back(
        {0, 0, "config model", e.code(),
         std::string("the model the config names could not be checked: ") + e.what()});
    return;
  }
  for (auto& p : problems)
    r->problems.push_back({0, 0, "config model", engram::Code::kConfig, std::move(p)});
}

}  // namespace

void AddVerifyCommand(CLI::App& app) {
  struct Flags {
    std::string table, config_path, reference;
    CheckFlags check;
    bool json = false;
    engram::table::VerifyOptions o;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand("verify",
                                   "Check everything a deployment needs; exit 0 = safe to deploy, "
                                   "3 = problems found (all listed)");
  s->add_option("table", f->table, "Table file (default: [engram.table] path of --config)");
  s->add_option("--config", f->config_path,
                "Also check the table against this config.toml and host memory");
  s->add_option("--tokenizer", f->o.tokenizer_path,
                "Check the table's tokenizer fingerprint against this tokenizer.json");
  s->add_option("-t,--threads", f->o.threads, "Checksum threads (default: all cores)");
  s->add_option("--reference", f->reference,
                "The table this one was converted from (quantize): with --config and "
                "--check-corpus, report what the conversion costs the model");
  AddCheckFlags(s, &f->check, "A problem (exit 3)");
  s->add_flag("--json", f->json, "Print the report as JSON");
  s->callback([f] {
    StderrReporter rep;
    ENGRAM_CHECK(f->reference.empty() == f->check.corpus.empty(), engram::Code::kInvalidArgument,
                 "--reference TABLE and --check-corpus FILE go together (and need --config)");
    ENGRAM_CHECK(f->reference.empty() || !f->config_path.empty(), engram::Code::kInvalidArgument,
                 "--reference runs the model: give --config cfg.toml");
    ENGRAM_CHECK(!f->reference.empty() || (f->check.max_kl < 0 && f->check.max_ppl_increase < 0),
                 engram::Code::kInvalidArgument,
                 "--max-kl and --max-ppl-increase need --reference TABLE and --check-corpus FILE");
    auto cfg = LoadConfigIfAny(f->config_path, rep, /*show_notes=*/true);
    if (cfg) {
      f->o.config = &*cfg;
      if (f->table.empty()) f->table = cfg->table.path;
      if (f->o.tokenizer_path.empty()) {
        // A missing tokenizer is the model check's problem (below), named there.
        std::string t = TokenizerFromConfig(*cfg);
        if (!t.empty() && engram::base::PathExists(t)) f->o.tokenizer_path = t;
      }
    }
    ENGRAM_CHECK(!f->table.empty(), engram::Code::kInvalidArgument,
                 "no table given; name one or use --config");
    engram::table::VerifyReport r;
    bool opened = true;
    try {
      r = engram::table::Verify(f->table, f->o, rep);
    } catch (const engram::Error& e) {
      // With --config, a table that cannot be opened is one problem among the config's.
      if (!cfg) throw;
      r = {};
      opened = false;
      r.path = f->table;
      r.problems.push_back({0, 0, "table", e.code(), e.what()});
    }
    const size_t before = r.problems.size();
    if (cfg) CheckModelSetup(*cfg, f->config_path, f->table, &r);
    if (cfg && !cfg->model.path.empty() && opened && r.problems.size() == before)
      CheckLedger(f->table, f->config_path, f->o.threads, rep, &r);
    if (!f->reference.empty() && opened && r.problems.size() == before) {
      const CheckReport c =
          RunCheck(f->config_path, f->reference, f->table, f->check.corpus,
                   f->check.max_tokens ? f->check.max_tokens : UINT64_MAX, f->o.threads, *cfg, rep);
      r.notes.push_back("against " + f->reference + ": " + c.Line() + "; row error (relative L2) " +
                        Fmt("%.3g", c.read_rows.rel_l2()) + " over the " +
                        std::to_string(c.read_rows.rows) + " rows the corpus reads");
      if (std::string why = c.Exceeds(f->check.max_kl, f->check.max_ppl_increase); !why.empty())
        r.problems.push_back({0, 0, "reference " + f->reference, engram::Code::kInvalidArgument,
                              "against " + f->reference + ": " + why});
    }
    PrintStdout(f->json ? r.ToJson() : r.ToText());
    CommandExit() = r.ok() ? kExitOk : kExitProblems;
  });
}

}  // namespace engramctl

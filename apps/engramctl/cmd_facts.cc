// `engramctl facts`: flags -> table::ReadLedger (the listing), or, with --check, the model
// plugin asking each fact again (model::FitOptions::ask_ledger).
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/model/fit.h"
#include "engram/table/ledger.h"

namespace engramctl {

void AddFactsCommand(CLI::App& app) {
  struct Flags {
    std::string table, config_path;
    bool check = false, json = false;
    int threads = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "facts",
      "List the facts append --fit recorded in a table's ledger; --check asks each one again "
      "through the model (exit 3 when any no longer holds)");
  s->add_option("table", f->table, "Table file (default: [engram.table] path of --config)");
  s->add_option("--config", f->config_path,
                "config.toml naming the table and, for --check, the model");
  s->add_flag("--check", f->check,
              "Ask every fact through the model (greedy) and report those that no longer hold");
  s->add_flag("--json", f->json, "Print the facts (and, with --check, the answers) as JSON");
  s->add_option("-t,--threads", f->threads, "--check: threads (default: all cores)");
  s->callback([f] {
    StderrReporter rep;
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    if (f->table.empty() && cfg) f->table = cfg->table.path;
    ENGRAM_CHECK(!f->table.empty(), engram::Code::kInvalidArgument,
                 "no table given; name one or use --config");
    if (!f->check) {
      const engram::table::LedgerListing l = engram::table::ReadLedger(f->table);
      if (f->json) {
        std::string j = "{\"table\":" + engram::base::JsonString(f->table) + ",\"facts\":[";
        bool first = true;
        for (const auto* list : {&l.folded, &l.journal})
          for (const auto& fact : *list) {
            j += (first ? "" : ",") + engram::table::FactJson(fact, list == &l.folded);
            first = false;
          }
        PrintStdout(j + "]}");
        return;
      }
      std::string out;
      for (const auto* list : {&l.folded, &l.journal})
        for (const auto& fact : *list)
          out += engram::table::DescribeFact(fact, list == &l.folded) + "\n";
      if (!out.empty()) std::fwrite(out.data(), 1, out.size(), stdout);
      rep.Log(engram::base::LogLevel::kInfo,
              f->table + ": " + std::to_string(l.size()) + " fact(s) in the ledger (" +
                  std::to_string(l.folded.size()) + " folded, " + std::to_string(l.journal.size()) +
                  " in the journal)");
      return;
    }
    ENGRAM_CHECK(cfg.has_value(), engram::Code::kInvalidArgument,
                 "facts --check asks the model: give --config cfg.toml with a [model] path");
    engram::model::FitOptions fo;
    fo.run.config_path = f->config_path;
    fo.run.table_path = f->table;
    fo.run.threads = f->threads;
    fo.ask_ledger = true;
    engram::model::FitResult fr;
    engram::base::CallModule(engram::model::LoadFitPlugin(), &fo, &rep, &fr);
    size_t failing = 0;
    std::string out =
        f->json ? "{\"table\":" + engram::base::JsonString(f->table) + ",\"facts\":[" : "";
    for (size_t i = 0; i < fr.asked.size(); ++i) {
      const auto& a = fr.asked[i];
      failing += !a.holds;
      if (f->json) {
        std::string j = engram::table::FactJson(a.fact, false);
        j.pop_back();
        out += (i ? "," : "") + j + ",\"holds\":" + (a.holds ? "true" : "false") +
               ",\"phrasings_holding\":" + std::to_string(a.phrasings_holding) +
               ",\"greedy\":" + engram::base::JsonString(a.greedy) + "}";
        continue;
      }
      out += "#" + std::to_string(a.fact.id) + " " +
             engram::base::JsonString(a.fact.prompts.front().text) + " -> " +
             engram::base::JsonString(a.fact.target) + ": " +
             (a.holds ? "holds"
                      : "NO LONGER HOLDS: the model says " + engram::base::JsonString(a.greedy)) +
             (a.fact.prompts.size() > 1 ? " (" + std::to_string(a.phrasings_holding) + " of " +
                                              std::to_string(a.fact.prompts.size()) + " phrasings)"
                                        : "") +
             "\n";
    }
    if (f->json)
      PrintStdout(out + "],\"holding\":" + std::to_string(fr.asked.size() - failing) +
                  ",\"failing\":" + std::to_string(failing) + "}");
    else if (!out.empty())
      std::fwrite(out.data(), 1, out.size(), stdout);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", fr.fit_seconds);
    rep.Log(engram::base::LogLevel::kInfo,
            f->table + ": " + std::to_string(fr.asked.size() - failing) + " of " +
                std::to_string(fr.asked.size()) + " ledger facts hold (checked in " + secs + " s)");
    if (failing) {
      rep.Log(engram::base::LogLevel::kWarning,
              std::to_string(failing) +
                  " fact(s) no longer hold: a later append (--force, or rows changed by entries "
                  "with values) overwrote them; append them again with --fit");
      CommandExit() = kExitProblems;
    }
  });
}

}  // namespace engramctl

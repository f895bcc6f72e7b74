// `engramctl verify`: flags -> table::Verify; exit 0 when deployable, 3 when problems are found.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/table/verify.h"

namespace engramctl {

void AddVerifyCommand(CLI::App& app) {
  struct Flags {
    std::string table, config_path;
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
  s->add_flag("--json", f->json, "Print the report as JSON");
  s->callback([f] {
    StderrReporter rep;
    auto cfg = LoadConfigIfAny(f->config_path, rep, /*show_notes=*/true);
    if (cfg) {
      f->o.config = &*cfg;
      if (f->table.empty()) f->table = cfg->table.path;
      if (f->o.tokenizer_path.empty()) {
        std::string t = TokenizerFromConfig(*cfg);
        if (!t.empty()) f->o.tokenizer_path = t;
      }
    }
    ENGRAM_CHECK(!f->table.empty(), engram::Code::kInvalidArgument,
                 "no table given; name one or use --config");
    engram::table::VerifyReport r = engram::table::Verify(f->table, f->o, rep);
    PrintStdout(f->json ? r.ToJson() : r.ToText());
    CommandExit() = r.ok() ? kExitOk : kExitProblems;
  });
}

}  // namespace engramctl

// `engramctl inspect`: flags -> table::Inspect -> text or JSON on stdout.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/table/inspect.h"

namespace engramctl {

void AddInspectCommand(CLI::App& app) {
  struct Flags {
    std::string table, config_path;
    bool json = false;
    engram::table::InspectOptions o;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "inspect", "Show a table's header, layout, sizes, addressing, checksums and journal");
  AddTableFlags(s, &f->table, &f->config_path);
  s->add_flag("--stats", f->o.stats,
              "Also scan owners and statistics: occupancy, collision rate, load histogram");
  s->add_flag("--json", f->json, "Print JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->table, f->config_path, rep);
    engram::table::InspectInfo info = engram::table::Inspect(f->table, f->o);
    PrintStdout(f->json ? info.ToJson() : info.ToText());
  });
}

}  // namespace engramctl

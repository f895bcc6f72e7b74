// `engramctl lookup`: flags -> table::LookupOptions -> table::Lookup -> text or JSON.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/table/lookup.h"

namespace engramctl {

void AddLookupCommand(CLI::App& app) {
  struct Flags {
    LayoutFlags layout;
    std::string config_path, ids, canonical_ids;
    std::vector<std::string> positional;
    bool json = false, values = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand("lookup",
                                   "Show per position the n-grams' bucket ids and, with a table, "
                                   "hit or miss and the owner; engram_hit_rate");
  s->add_option("args", f->positional,
                "[TABLE] \"text\"  (TABLE is a file; without one the addressing alone is shown)");
  s->add_option("--ids", f->ids, "Input as tokenizer ids, e.g. 1,2,3");
  s->add_option("--canonical-ids", f->canonical_ids, "Input as canonical ids, e.g. 1,2,3");
  s->add_option("--config", f->config_path,
                "config.toml: layout, tokenizer, table path, deterministic_addressing");
  AddLayoutFlags(s, &f->layout);
  s->add_flag("--json", f->json, "Print JSON");
  s->add_flag("--values", f->values,
              "With a table and --json: include every looked-up row's values");
  s->callback([f] {
    StderrReporter rep;
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    engram::table::LookupOptions o;
    if (cfg) {
      o.layout.config = &*cfg;
      o.layout.tokenizer_path = TokenizerFromConfig(*cfg);
      o.deterministic_addressing = cfg->engram.deterministic_addressing;
    }
    ApplyLayoutFlags(f->layout, &o.layout);
    std::vector<std::string> args = f->positional;
    // A first argument that names an existing file is the table.
    if (!args.empty() && engram::base::PathExists(args[0]) &&
        (args.size() > 1 || !f->ids.empty() || !f->canonical_ids.empty())) {
      o.table_path = args[0];
      args.erase(args.begin());
    } else if (cfg && !cfg->table.path.empty() && engram::base::PathExists(cfg->table.path)) {
      o.table_path = cfg->table.path;
    }
    // Two positionals, or one beside --ids/--canonical-ids: the first can only be the table.
    const bool ids_given = !f->ids.empty() || !f->canonical_ids.empty();
    ENGRAM_CHECK(!o.table_path.empty() || args.size() < (ids_given ? 1u : 2u), engram::Code::kIo,
                 args[0] << ": no such table file; check the path (TABLE comes first, then the "
                            "input)");
    int inputs = !args.empty() + !f->ids.empty() + !f->canonical_ids.empty();
    ENGRAM_CHECK(inputs == 1 && args.size() <= 1, engram::Code::kInvalidArgument,
                 "give exactly one input: \"text\", --ids 1,2,3 or --canonical-ids 1,2,3 (after an "
                 "optional TABLE)");
    if (!args.empty()) {
      o.input = 0;
      o.text = args[0];
    } else if (!f->ids.empty()) {
      o.input = 1;
      for (uint64_t v : ParseUintList(f->ids, "--ids")) o.ids.push_back(static_cast<uint32_t>(v));
    } else {
      o.input = 2;
      for (uint64_t v : ParseUintList(f->canonical_ids, "--canonical-ids"))
        o.canonical_ids.push_back(static_cast<uint32_t>(v));
    }
    o.values = f->values;
    engram::table::LookupResult r = engram::table::Lookup(o);
    PrintStdout(f->json ? r.ToJson() : r.ToText());
  });
}

}  // namespace engramctl

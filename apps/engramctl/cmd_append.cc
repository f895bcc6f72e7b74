// `engramctl append`: flags -> table::AppendOptions -> table::Append.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/units.h"
#include "engram/table/append.h"

namespace engramctl {

void AddAppendCommand(CLI::App& app) {
  struct Flags {
    engram::table::AppendOptions o;
    std::string config_path;
    bool no_wait = false, json = false;
  };
  auto f = std::make_shared<Flags>();
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
    for (const auto& d : r.displaced) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "%08x", d.previous_tag);
      out += "displaced: layer " + std::to_string(d.layer_id) + " order " +
             std::to_string(d.order) + " head " + std::to_string(d.head) + " bucket " +
             std::to_string(d.bucket) + ": previous owner " + tag;
      if (!d.previous_ids.empty()) {
        out += " (appended n-gram";
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

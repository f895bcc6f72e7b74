// `engramctl sort-buckets`: flags -> table::FoldOptions -> table::SortBuckets.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/units.h"
#include "engram/table/fold.h"

namespace engramctl {

void AddSortBucketsCommand(CLI::App& app) {
  struct Flags {
    engram::table::FoldOptions o;
    bool no_wait = false, json = false;
    std::string config_path;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand("sort-buckets",
                                   "Fold the journal into the base in bucket order (deterministic "
                                   "addressing again); idempotent");
  AddTableFlags(s, &f->o.table, &f->config_path);
  s->add_option("-o,--output", f->o.output,
                "Write the folded table here instead of replacing TABLE");
  s->add_flag("--no-wait", f->no_wait, "Fail at once if another writer holds the table's lock");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--json", f->json, "Print the result as JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->o.table, f->config_path, rep);
    f->o.wait = !f->no_wait;
    engram::table::FoldResult r = engram::table::SortBuckets(f->o, rep);
    if (f->json) {
      PrintStdout("{\"output\":\"" + r.output + "\",\"entries\":" + std::to_string(r.entries) +
                  ",\"rows\":" + std::to_string(r.rows) + ",\"facts\":" + std::to_string(r.facts) +
                  ",\"upgraded\":" + (r.upgraded ? "true" : "false") +
                  ",\"nothing_to_do\":" + (r.nothing_to_do ? "true" : "false") + "}");
      return;
    }
    if (r.nothing_to_do)
      rep.Log(engram::base::LogLevel::kInfo,
              f->o.table + ": the journal is empty; nothing to fold (addressing is deterministic)");
    else
      rep.Log(engram::base::LogLevel::kInfo,
              "folded " + std::to_string(r.entries) + " journal entries (" +
                  std::to_string(r.rows) + " rows) into " + r.output + " in " +
                  engram::base::FormatSeconds(r.seconds) + "; its journal is empty" +
                  (r.upgraded ? "; upgraded to format 3.2 (fact ledger)" : ""));
  });
}

}  // namespace engramctl

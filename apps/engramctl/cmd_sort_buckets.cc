// `engramctl sort-buckets`: flags -> table::FoldOptions -> table::SortBuckets.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli_common.h"
#include "engram/base/interrupt.h"
#include "engram/base/units.h"
#include "engram/table/fold.h"

namespace engramctl {

namespace {

std::string Seconds3(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", s);
  return b;
}

}  // namespace

void AddSortBucketsCommand(CLI::App& app) {
  struct Flags {
    engram::table::FoldOptions o;
    bool no_wait = false, json = false;
    std::string config_path;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "sort-buckets",
      "Fold the journal into the base (deterministic addressing again), in place: only the rows "
      "the journal names are written; idempotent, and a killed fold is completed by the next run");
  AddTableFlags(s, &f->o.table, &f->config_path);
  s->add_option("-o,--output", f->o.output,
                "Write the folded table here (a new file) and leave TABLE as it is");
  s->add_flag("--rewrite", f->o.rewrite,
              "Write a whole new base and rename it over TABLE (compaction) instead of folding in "
              "place; needs free disk for a copy of the table");
  s->add_flag("--no-wait", f->no_wait,
              "Fail at once if another writer holds the table's lock, or readers are in a request");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--json", f->json, "Print the result as JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->o.table, f->config_path, rep);
    f->o.wait = !f->no_wait;
    engram::base::CatchInterrupts();  // a fold finishes or undoes its step, then stops
    engram::table::FoldResult r = engram::table::SortBuckets(f->o, rep);
    const std::string state = !r.interrupted_by ? ""
                              : r.changed       ? "folded"
                                                : "the table is unchanged";
    if (f->json) {
      PrintStdout("{\"output\":\"" + r.output + "\",\"entries\":" + std::to_string(r.entries) +
                  ",\"rows\":" + std::to_string(r.rows) + ",\"facts\":" + std::to_string(r.facts) +
                  ",\"in_place\":" + (r.in_place ? "true" : "false") +
                  ",\"bytes_written\":" + std::to_string(r.bytes_written) +
                  ",\"resumed\":" + (r.resumed ? "true" : "false") +
                  ",\"upgraded\":" + (r.upgraded ? "true" : "false") +
                  ",\"nothing_to_do\":" + (r.nothing_to_do ? "true" : "false") +
                  ",\"interrupted\":" + (r.interrupted_by ? "\"" + state + "\"" : "null") +
                  ",\"seconds\":" + Seconds3(r.seconds) + "}");
    } else if (r.interrupted_by) {
      std::fprintf(stderr, "engramctl sort-buckets: %s: interrupted; %s\n", f->o.table.c_str(),
                   state.c_str());
    } else {
      if (r.resumed)
        rep.Log(engram::base::LogLevel::kInfo,
                f->o.table + ": completed a fold that had been interrupted");
      if (r.nothing_to_do) {
        if (!r.resumed)
          rep.Log(engram::base::LogLevel::kInfo,
                  f->o.table +
                      ": the journal is empty; nothing to fold (addressing is "
                      "deterministic)");
      } else {
        rep.Log(engram::base::LogLevel::kInfo,
                "folded " + std::to_string(r.entries) + " journal entries (" +
                    std::to_string(r.rows) + " rows) into " + r.output + " in " +
                    engram::base::FormatSeconds(r.seconds) +
                    (r.in_place
                         ? " in place (" + engram::base::FormatBytes(r.bytes_written) + " written)"
                         : std::string(" (a new file)")) +
                    "; its journal is empty" +
                    (r.upgraded ? "; upgraded to format 3.3 (in-place folds from now on)" : ""));
      }
    }
    if (r.interrupted_by) CommandExit() = 128 + r.interrupted_by;
  });
}

}  // namespace engramctl

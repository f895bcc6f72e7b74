// `engramctl export`: flags -> table::ExportOptions -> table::Export.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/json.h"
#include "engram/base/units.h"
#include "engram/table/export.h"

namespace engramctl {

void AddExportCommand(CLI::App& app) {
  struct Flags {
    engram::table::ExportOptions o;
    std::string max_shard, config_path;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "export",
      "Write a table's rows (journal applied) as safetensors; build --values reads them back");
  AddTableFlags(s, &f->o.table, &f->config_path);
  s->add_option("-o,--output", f->o.output,
                "Output .safetensors (a directory with --max-shard-size)")
      ->required();
  s->add_option("--tensor", f->o.tensor,
                "Tensor name; '{layer}' writes one tensor per Engram layer")
      ->capture_default_str();
  CLI::Option* scale = s->add_option("--scale-tensor", f->o.scale_tensor,
                                     "fp8 tables: scale tensor name (same '{layer}' rule)")
                           ->capture_default_str();
  s->add_option("--max-shard-size", f->max_shard,
                "Split into files of at most SIZE (e.g. 5G) plus model.safetensors.index.json");
  s->add_flag("--json", f->json, "Print the result as JSON on stdout");
  s->callback([f, scale] {
    StderrReporter rep;
    ResolveTable(&f->o.table, f->config_path, rep);
    f->o.scale_tensor_given = scale->count() > 0;
    if (!f->max_shard.empty())
      f->o.max_shard_bytes = engram::base::ParseSize(f->max_shard, "--max-shard-size");
    engram::table::ExportResult r = engram::table::Export(f->o, rep);
    if (f->json) {
      PrintStdout("{\"output\":" + engram::base::JsonString(f->o.output) + ",\"bytes\":" +
                  std::to_string(r.bytes) + ",\"tensors\":" + std::to_string(r.tensors) +
                  ",\"files\":" + std::to_string(r.files) +
                  ",\"journal_rows\":" + std::to_string(r.journal_rows) + "}");
      return;
    }
    rep.Log(engram::base::LogLevel::kInfo,
            "exported " + engram::base::FormatBytes(r.bytes) + " in " + std::to_string(r.tensors) +
                " tensors, " + std::to_string(r.files) + " file(s), to " + f->o.output +
                (r.journal_rows ? " (" + std::to_string(r.journal_rows) + " rows from the journal)"
                                : ""));
  });
}

}  // namespace engramctl

// `engramctl build`: flags -> table::BuildOptions -> table::Build.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/table/build.h"

namespace engramctl {

namespace {

struct BuildFlags {
  engram::table::BuildOptions o;
  LayoutFlags layout;
  std::string config_path, memory, shard;
  bool json = false, no_stats = false;
};

void Run(BuildFlags& f) {
  StderrReporter rep;
  engram::base::Stopwatch sw;
  auto cfg = LoadConfigIfAny(f.config_path, rep);
  engram::table::BuildOptions& o = f.o;
  engram::table::LayoutRequest& lr = o.layout;
  if (cfg) {
    lr.config = &*cfg;
    lr.tokenizer_path = TokenizerFromConfig(*cfg);
    if (o.output.empty()) o.output = cfg->table.path;
  }
  ApplyLayoutFlags(f.layout, &lr);
  if (!f.memory.empty()) o.memory_bytes = engram::base::ParseSize(f.memory, "--memory", 'K');
  o.with_stats = !f.no_stats;
  if (!f.shard.empty()) engram::base::ParseShard(f.shard, &o.shard_index, &o.shard_count);
  o.command_line = CommandLine();
  engram::table::BuildResult r = engram::table::Build(o, rep);
  if (o.shard_count > 1 && !r.dry_run) {
    rep.Log(engram::base::LogLevel::kInfo,
            "wrote shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) +
                " summary " + o.output + " (" + std::to_string(r.tokens) +
                " tokens); combine all shards with 'engramctl merge'");
    rep.Log(engram::base::LogLevel::kInfo,
            engram::base::FormatResourceLine(sw.Seconds(), engram::base::CurrentResourceUsage()));
    return;
  }
  if (r.dry_run) {
    if (f.json) {
      PrintStdout("{\"dry_run\":true,\"file_bytes\":" + std::to_string(r.plan.file_size) +
                  ",\"rows_bytes\":" + std::to_string(r.plan.rows_bytes) +
                  ",\"total_rows\":" + std::to_string(r.layout.total_rows) +
                  ",\"ram_bytes\":" + std::to_string(r.ram_estimate) +
                  ",\"temp_bytes\":" + std::to_string(r.temp_estimate + r.plan.file_size) + "}");
    } else {
      PrintStdout(engram::table::DescribePlan(r, o) + "dry run: nothing written");
    }
    return;
  }
  auto usage = engram::base::CurrentResourceUsage();
  rep.Log(engram::base::LogLevel::kInfo,
          "built " + o.output + ": " + std::to_string(r.layout.total_rows) + " rows, " +
              std::to_string(r.tokens) + " tokens in " + std::to_string(r.documents) +
              " documents, " + std::to_string(r.ngrams_distinct) + " distinct n-grams, " +
              std::to_string(r.owned_rows) + " rows with an owner, " +
              engram::base::FormatBytes(r.plan.file_size));
  rep.Log(engram::base::LogLevel::kInfo, engram::base::FormatResourceLine(sw.Seconds(), usage));
  if (f.json)
    PrintStdout("{\"output\":" + engram::base::JsonString(o.output) + ",\"total_rows\":" +
                std::to_string(r.layout.total_rows) + ",\"tokens\":" + std::to_string(r.tokens) +
                ",\"documents\":" + std::to_string(r.documents) +
                ",\"distinct_ngrams\":" + std::to_string(r.ngrams_distinct) +
                ",\"owned_rows\":" + std::to_string(r.owned_rows) +
                ",\"peak_rss_bytes\":" + std::to_string(usage.peak_rss_bytes) +
                ",\"seconds\":" + std::to_string(sw.Seconds()) +
                ",\"count_seconds\":" + std::to_string(r.count_seconds) +
                ",\"assign_seconds\":" + std::to_string(r.assign_seconds) +
                ",\"spill_runs\":" + std::to_string(r.spill_runs) +
                ",\"spilled_bytes\":" + std::to_string(r.spilled_bytes) + "}");
}

}  // namespace

void AddMergeCommand(CLI::App& app) {
  auto mo = std::make_shared<engram::table::MergeOptions>();
  CLI::App* s = app.add_subcommand(
      "merge", "Combine the partial summaries of a sharded build into the table");
  s->add_option("parts", mo->parts,
                "Partial summaries from 'engramctl build --shard I/N', one per shard")
      ->required();
  s->add_option("-o,--output", mo->output, "Table to write")->required();
  s->add_option("-t,--threads", mo->threads, "Threads (default: all cores)");
  s->callback([mo] {
    StderrReporter rep;
    engram::base::Stopwatch sw;
    mo->command_line = CommandLine();
    engram::table::BuildResult r = engram::table::Merge(*mo, rep);
    rep.Log(engram::base::LogLevel::kInfo,
            "merged " + std::to_string(mo->parts.size()) + " shards into " + mo->output + ": " +
                std::to_string(r.layout.total_rows) + " rows, " + std::to_string(r.tokens) +
                " tokens, " + std::to_string(r.owned_rows) + " rows with an owner");
    rep.Log(engram::base::LogLevel::kInfo,
            engram::base::FormatResourceLine(sw.Seconds(), engram::base::CurrentResourceUsage()));
  });
}

void AddBuildCommand(CLI::App& app) {
  auto f = std::make_shared<BuildFlags>();
  CLI::App* s = app.add_subcommand(
      "build", "Build a v3 table from a corpus and initial or imported row values");
  s->add_option("-o,--output", f->o.output,
                "Table to write (default: [engram.table] path of --config)");
  s->add_option("--config", f->config_path,
                "config.toml giving the layout ([engram]) and tokenizer ([model])");
  s->add_option("--tokens", f->o.token_files,
                "Pre-tokenized corpus: little-endian u32 ids, 0xFFFFFFFF between documents");
  s->add_option("--corpus", f->o.corpus_files,
                "UTF-8 text corpus (one document per line unless --doc-per-file)");
  s->add_flag("--doc-per-file", f->o.doc_per_file, "Each --corpus file is one document");
  s->add_flag("--canonical-ids", f->o.ids_are_canonical,
              "--tokens files already hold canonical ids");
  AddLayoutFlags(s, &f->layout);
  s->add_option("--init", f->o.init, "Initial row values: zeros | normal")->capture_default_str();
  s->add_option("--seed", f->o.init_seed, "Seed of --init normal");
  s->add_option("--init-std", f->o.init_std, "Standard deviation of --init normal")
      ->capture_default_str();
  s->add_option("--values", f->o.values_path,
                "Copy rows from a safetensors file, index .json or model directory");
  s->add_option("--tensor", f->o.values_tensor,
                "Tensor in --values holding [rows, row_dim] values");
  s->add_option("--scale-tensor", f->o.scales_tensor,
                "fp8 tables: tensor of e8m0 scales [rows, row_dim/32]");
  s->add_flag("--no-stats", f->no_stats, "Do not write the per-bucket STATS section");
  s->add_option(
       "--owners", f->o.owners,
       "Owner selection: exact (counts within --memory, spills to --temp-dir) | sketch (majority "
       "vote per row: O(rows) memory, no temp disk, approximate statistics)")
      ->capture_default_str();
  s->add_option("--shard", f->shard,
                "I/N: write the partial summary of shard I of N to -o (exact: every Nth corpus "
                "block; sketch: "
                "every Nth sub-table); combine all N with 'engramctl merge'");
  s->add_option(
       "--block-tokens", f->o.block_tokens,
       "Tokens per work block (parallelism and shard granularity; results do not depend on it)")
      ->capture_default_str();
  s->add_option("--memory", f->memory, "RAM budget for counting, GNU sort units (e.g. 4G, 50%)");
  s->add_option("--temp-dir", f->o.temp_dir,
                "Directory for spill files (default: next to the output)");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--dry-run", f->o.dry_run, "Print file size, RAM and temp-disk needs; write nothing");
  s->add_flag("--json", f->json, "Print the result as JSON on stdout");
  s->callback([f] { Run(*f); });
}

}  // namespace engramctl

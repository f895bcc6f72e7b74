// `engramctl build`: flags -> table::BuildOptions -> table::Build.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/builder/build.h"

namespace engramctl {

namespace {

struct BuildFlags {
  engram::builder::BuildOptions o;
  LayoutFlags layout;
  std::string config_path, memory, shard;
  bool json = false, no_stats = false;
};

// Replaces every "@list.txt" argument with the paths listed in it, one a line (blank lines and
// lines starting with '#' are skipped; relative paths are taken as written).
std::vector<std::string> ExpandLists(const std::vector<std::string>& args, const char* flag) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a.empty() || a[0] != '@') {
      out.push_back(a);
      continue;
    }
    std::string text = engram::base::ReadFileToString(a.substr(1), 1ull << 32);
    size_t before = out.size();
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      std::string line = text.substr(pos, nl - pos);
      pos = nl + 1;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      out.push_back(line);
    }
    ENGRAM_CHECK(out.size() > before, engram::Code::kInvalidArgument,
                 flag << " " << a << ": the list names no files; write one path a line");
  }
  return out;
}

void Run(BuildFlags& f) {
  f.o.token_files = ExpandLists(f.o.token_files, "--tokens");
  f.o.corpus_files = ExpandLists(f.o.corpus_files, "--corpus");
  StderrReporter rep;
  engram::base::Stopwatch sw;
  auto cfg = LoadConfigIfAny(f.config_path, rep);
  engram::builder::BuildOptions& o = f.o;
  engram::format::LayoutRequest& lr = o.layout;
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
  engram::builder::BuildResult r = engram::builder::Build(o, rep);
  if (o.shard_count > 1 && !r.dry_run) {
    rep.Log(engram::base::LogLevel::kInfo,
            "wrote shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) +
                " summary " + o.output + " (" + std::to_string(r.tokens) + " tokens from input " +
                (r.range_in_bytes ? "bytes [" : "tokens [") + std::to_string(r.range_begin) + ", " +
                std::to_string(r.range_end) + ") of " + std::to_string(r.range_total) +
                "); combine all shards with 'engramctl merge'");
    rep.Log(engram::base::LogLevel::kInfo,
            engram::base::FormatResourceLine(sw.Seconds(), engram::base::CurrentResourceUsage()));
    return;
  }
  if (r.dry_run) {
    if (f.json) {
      PrintStdout("{\"dry_run\":true,\"file_bytes\":" + std::to_string(r.plan.file_size) +
                  ",\"rows_bytes\":" + std::to_string(r.plan.rows_bytes) +
                  ",\"total_rows\":" + std::to_string(r.layout.total_rows) +
                  ",\"ram_bytes\":" + std::to_string(r.ram_estimate) + ",\"temp_bytes\":" +
                  std::to_string(r.temp_estimate + (o.shard_count > 1 ? 0 : r.plan.file_size)) +
                  (o.shard_count > 1
                       ? ",\"shard\":" + std::to_string(o.shard_index) +
                             ",\"shard_count\":" + std::to_string(o.shard_count) +
                             ",\"part_bytes\":" + std::to_string(r.part_estimate) +
                             ",\"merge_ram_bytes\":" + std::to_string(r.merge_ram_estimate)
                       : std::string()) +
                  "}");
    } else {
      PrintStdout(engram::builder::DescribePlan(r, o) + "dry run: nothing written");
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
  auto mo = std::make_shared<engram::builder::MergeOptions>();
  auto memory = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* s = app.add_subcommand(
      "merge", "Combine the partial summaries of a sharded build into the table");
  s->add_option("parts", mo->parts,
                "Partial summaries from 'engramctl build --shard I/N' (or merge --partial), "
                "covering every shard once")
      ->required();
  s->add_option("-o,--output", mo->output, "Table to write (a part with --partial)")->required();
  s->add_flag("--partial", mo->partial,
              "Write a part covering the given parts' shards instead of a table (exact owners): "
              "merge of such parts gives the same table, so merges can run as a tree");
  s->add_option("--memory", *memory,
                "RAM for open parts, GNU sort units (e.g. 4G, 50%); more exact parts than it "
                "holds are merged in rounds through temporary parts; half of it bounds the owner "
                "cells (16 bytes a row), chosen in passes when the table has more");
  s->add_option("--temp-dir", mo->temp_dir,
                "Where merge rounds write temporary parts (default: next to the output)");
  s->add_option("-t,--threads", mo->threads, "Threads (default: all cores)");
  s->add_flag("--json", *json, "Print the result as JSON on stdout");
  s->callback([mo, memory, json] {
    StderrReporter rep;
    engram::base::Stopwatch sw;
    mo->command_line = CommandLine();
    if (!memory->empty()) mo->memory_bytes = engram::base::ParseSize(*memory, "--memory", 'K');
    engram::builder::BuildResult r = engram::builder::Merge(*mo, rep);
    if (*json) {
      PrintStdout("{\"output\":" + engram::base::JsonString(mo->output) +
                  ",\"partial\":" + (mo->partial ? "true" : "false") + ",\"parts\":" +
                  std::to_string(mo->parts.size()) + ",\"tokens\":" + std::to_string(r.tokens) +
                  ",\"rows\":" + std::to_string(mo->partial ? 0 : r.layout.total_rows) +
                  ",\"owned_rows\":" + std::to_string(r.owned_rows) +
                  ",\"seconds\":" + std::to_string(sw.Seconds()) + "}");
      return;
    }
    if (mo->partial) {
      rep.Log(engram::base::LogLevel::kInfo,
              "merged " + std::to_string(mo->parts.size()) + " parts into part " + mo->output +
                  " (" + std::to_string(r.tokens) +
                  " tokens); give it to 'engramctl merge' with the parts of the other shards");
      return;
    }
    rep.Log(engram::base::LogLevel::kInfo,
            "merged " + std::to_string(mo->parts.size()) + " parts into " + mo->output + ": " +
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
                "Pre-tokenized corpus files (or @list.txt naming one a line): little-endian u32 "
                "ids, 0xFFFFFFFF between documents");
  s->add_option("--corpus", f->o.corpus_files,
                "UTF-8 text corpus files (or @list.txt naming one a line); one document per line "
                "unless --doc-per-file");
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
  s->add_flag("--tile-values", f->o.tile_values,
              "Native tables with more buckets than --tensor: repeat each sub-table's rows (2^m "
              "buckets in the tensor, 2^k in the table: 2^(k-m) times). Every n-gram reads the row "
              "it read before, so the model's outputs do not change, and rows later fitted or "
              "appended collide 2^(k-m) times less often with other n-grams");
  s->add_flag("--no-stats", f->no_stats, "Do not write the per-bucket STATS section");
  s->add_option(
       "--owners", f->o.owners,
       "Owner selection: exact (counts within --memory, spills to --temp-dir) | sketch (majority "
       "vote per row: O(rows) memory, no temp disk, approximate statistics)")
      ->capture_default_str();
  s->add_option("--shard", f->shard,
                "I/N: write the partial summary of shard I of N to -o (exact: the Ith of N even "
                "slices of the inputs; sketch: every Nth sub-table); combine all N with "
                "'engramctl merge'");
  s->add_option(
       "--block-tokens", f->o.block_tokens,
       "Tokens per work block (parallelism and shard granularity; results do not depend on it)")
      ->capture_default_str();
  s->add_option("--memory", f->memory,
                "RAM budget for counting, GNU sort units (e.g. 4G, 50%); half of it again bounds "
                "the owner cells (16 bytes a row), chosen in passes when the table has more");
  s->add_option("--temp-dir", f->o.temp_dir,
                "Directory for spill files (default: next to the output)");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--dry-run", f->o.dry_run, "Print file size, RAM and temp-disk needs; write nothing");
  s->add_flag("--json", f->json, "Print the result as JSON on stdout");
  s->callback([f] { Run(*f); });
}

}  // namespace engramctl

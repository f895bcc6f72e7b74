// `engramctl build`: flags -> table::BuildOptions -> table::Build.
#include <CLI/CLI.hpp>
#include <sstream>

#include "cli_common.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/table/build.h"

namespace engramctl {

namespace {

struct BuildFlags {
  engram::table::BuildOptions o;
  std::string config_path, layers, dtype, memory, addressing, buckets, base_sizes;
  uint64_t hash_seed = 0;
  uint32_t order = 0, heads = 0, row_dim = 0, pad_id = 0, vocab = 0;
  bool json = false, no_stats = false;
  std::vector<CLI::Option*> opts;
  CLI::Option *o_hash_seed, *o_order, *o_heads, *o_row_dim, *o_pad, *o_vocab, *o_layers, *o_dtype,
      *o_addr, *o_buckets, *o_base;
};

std::vector<uint64_t> ParseList(const std::string& s, const char* flag) {
  std::vector<uint64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      unsigned long long x = std::stoull(item, &used);
      ENGRAM_CHECK(used == item.size(), engram::Code::kInvalidArgument, "");
      v.push_back(x);
    } catch (...) {
      ENGRAM_THROW(engram::Code::kInvalidArgument,
                   flag << " '" << s << "': write comma-separated integers, e.g. 1,15");
    }
  }
  ENGRAM_CHECK(!v.empty(), engram::Code::kInvalidArgument, flag << " is empty");
  return v;
}

void Run(BuildFlags& f) {
  StderrReporter rep;
  engram::base::Stopwatch sw;
  auto cfg = LoadConfigIfAny(f.config_path, rep);
  engram::table::BuildOptions& o = f.o;
  engram::table::LayoutRequest& lr = o.layout;
  if (cfg) {
    lr.config = &*cfg;
    if (lr.tokenizer_path.empty()) lr.tokenizer_path = TokenizerFromConfig(*cfg);
    if (o.output.empty()) o.output = cfg->table.path;
  }
  if (f.o_addr->count()) lr.addressing = f.addressing;
  if (f.o_hash_seed->count()) lr.seed = f.hash_seed;
  if (f.o_layers->count()) {
    std::vector<uint32_t> ids;
    for (uint64_t v : ParseList(f.layers, "--layers")) ids.push_back(static_cast<uint32_t>(v));
    lr.layer_ids = ids;
  }
  if (f.o_order->count()) lr.max_order = f.order;
  if (f.o_heads->count()) lr.n_heads = f.heads;
  if (f.o_buckets->count()) lr.buckets = engram::base::ParseSize(f.buckets, "--buckets");
  if (f.o_base->count()) lr.base_sizes = ParseList(f.base_sizes, "--base-sizes");
  if (f.o_row_dim->count()) lr.row_dim = f.row_dim;
  if (f.o_pad->count()) lr.pad_token = f.pad_id;
  if (f.o_vocab->count()) lr.vocab_size = f.vocab;
  if (f.o_dtype->count()) {
    auto dt = engram::base::ParseDType(f.dtype);
    ENGRAM_CHECK(dt.has_value(), engram::Code::kInvalidArgument,
                 "--dtype " << f.dtype << ": use f32, bf16, f16 or fp8-e4m3");
    lr.dtype = *dt;
  }
  if (!f.memory.empty()) o.memory_bytes = engram::base::ParseSize(f.memory, "--memory", 'K');
  o.with_stats = !f.no_stats;
  o.command_line = CommandLine();
  engram::table::BuildResult r = engram::table::Build(o, rep);
  if (r.dry_run) {
    std::string text = engram::table::DescribePlan(r, o);
    if (f.json) {
      PrintStdout("{\"dry_run\":true,\"file_bytes\":" + std::to_string(r.plan.file_size) +
                  ",\"rows_bytes\":" + std::to_string(r.plan.rows_bytes) +
                  ",\"total_rows\":" + std::to_string(r.layout.total_rows) +
                  ",\"ram_bytes\":" + std::to_string(r.ram_estimate) +
                  ",\"temp_bytes\":" + std::to_string(r.temp_estimate + r.plan.file_size) + "}");
    } else {
      PrintStdout(text + "dry run: nothing written");
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
                ",\"seconds\":" + std::to_string(sw.Seconds()) + "}");
}

}  // namespace

void AddBuildCommand(CLI::App& app) {
  auto f = std::make_shared<BuildFlags>();
  CLI::App* s = app.add_subcommand(
      "build", "Build a v3 table from a corpus and initial or imported row values");
  s->add_option("-o,--output", f->o.output,
                "Table to write (default: [engram.table] path of --config)");
  s->add_option("--config", f->config_path,
                "config.toml giving the layout ([engram]) and tokenizer ([model])");
  s->add_option("--layout", f->o.layout.preset, "Layout preset: engram-demo | deepseek-v4.1");
  s->add_option("--tokens", f->o.token_files,
                "Pre-tokenized corpus: little-endian u32 ids, 0xFFFFFFFF between documents");
  s->add_option("--corpus", f->o.corpus_files,
                "UTF-8 text corpus (one document per line unless --doc-per-file)");
  s->add_flag("--doc-per-file", f->o.doc_per_file, "Each --corpus file is one document");
  s->add_option("--tokenizer", f->o.layout.tokenizer_path,
                "HF tokenizer.json: canonical-id map and text tokenization");
  s->add_flag("--canonical-ids", f->o.ids_are_canonical,
              "--tokens files already hold canonical ids");
  f->o_addr = s->add_option("--addressing", f->addressing,
                            "native (XXH3, power-of-two buckets) | deepseek (mod prime)");
  f->o_hash_seed =
      s->add_option("--hash-seed", f->hash_seed, "Table seed of the addressing (default 0)");
  f->o_layers = s->add_option("--layers", f->layers, "Engram layer ids, e.g. 1,15");
  f->o_order = s->add_option("--order", f->order, "Max n-gram order N (orders 2..N)");
  f->o_heads = s->add_option("--heads", f->heads, "Hash heads per order");
  f->o_buckets = s->add_option("--buckets", f->buckets,
                               "Buckets per sub-table (native: power of two, e.g. 1M or 1048576)");
  f->o_base = s->add_option("--base-sizes", f->base_sizes,
                            "deepseek: prime search base per order, e.g. 646400,646400");
  f->o_row_dim = s->add_option("--row-dim", f->row_dim, "Values per row (embed_dim / n_heads)");
  f->o_dtype = s->add_option("--dtype", f->dtype, "Row storage: f32 | bf16 | f16 | fp8-e4m3");
  f->o_pad = s->add_option("--pad-id", f->pad_id,
                           "Tokenizer id of the pad token (its canonical id pads history)");
  f->o_vocab = s->add_option("--vocab-size", f->vocab,
                             "Canonical vocabulary size when there is no tokenizer");
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
  s->add_option("--owners", f->o.owners, "Owner selection: exact")->capture_default_str();
  s->add_option("--memory", f->memory, "RAM budget for counting, GNU sort units (e.g. 4G, 50%)");
  s->add_option("--temp-dir", f->o.temp_dir,
                "Directory for spill files (default: next to the output)");
  s->add_option("-t,--threads", f->o.threads, "Threads (default: all cores)");
  s->add_flag("--dry-run", f->o.dry_run, "Print file size, RAM and temp-disk needs; write nothing");
  s->add_flag("--json", f->json, "Print the result as JSON on stdout");
  s->callback([f] { Run(*f); });
}

}  // namespace engramctl

// `engramctl build`: a v3 table from a corpus (pre-tokenized ids or text) and initial or
// imported row values. Owners are chosen per bucket from n-gram counts (schemas/table_format.md
// §6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/builder/token_stream.h"
#include "engram/format/resolve.h"
#include "engram/format/writer.h"

namespace engram::builder {

struct BuildOptions {
  std::string output;
  format::LayoutRequest layout;
  std::vector<std::string> token_files;   // flat LE u32 ids, kDocSeparator between documents
  std::vector<std::string> corpus_files;  // UTF-8 text (needs a tokenizer)
  bool doc_per_file = false;              // text: one document per file instead of per line
  bool ids_are_canonical = false;         // token files hold canonical ids already
  std::string init = "zeros";             // zeros | normal
  uint64_t init_seed = 0;
  double init_std = 0.02;
  std::string values_path;    // safetensors file / index / directory
  std::string values_tensor;  // rows: [total_rows, row_dim] (any shape with that numel)
  std::string scales_tensor;  // fp8 tables: e8m0 scales [total_rows, row_dim / 32]
  // Native tables: a tensor with 2^m buckets per sub-table fills a table of 2^k (k > m), each
  // sub-table's rows repeated 2^(k-m) times. Exact: bucket = hash & (2^k - 1) keeps the low m bits
  // of the tensor's bucket, so every n-gram reads the row it read there.
  bool tile_values = false;
  bool with_stats = true;
  bool dry_run = false;
  int threads = 0;                            // 0 = all cores
  uint64_t memory_bytes = 0;                  // 0 = default budget
  std::string temp_dir;                       // "" = next to the output
  std::string owners = "exact";               // exact | sketch
  uint32_t shard_index = 0, shard_count = 1;  // count > 1: write a partial summary to `output`
  size_t block_tokens = 1u << 22;  // parallel/shard granularity (results do not depend on it)
  std::string command_line;        // recorded in PROVENANCE
  uint32_t chunk_log2 = format::kDefaultChunkLog2;
};

struct BuildResult {
  format::Layout layout;
  format::SizePlan plan;
  bool dry_run = false;
  uint64_t tokens = 0, documents = 0, ngrams_distinct = 0, owned_rows = 0;
  uint64_t ram_estimate = 0, temp_estimate = 0;
  uint64_t part_estimate = 0;       // --shard: the part file this shard writes (dry run)
  uint64_t merge_ram_estimate = 0;  // --shard: what the merge of all parts needs (dry run)
  double seconds = 0;
  double count_seconds = 0;                    // reading + counting (the owner phase's corpus pass)
  double assign_seconds = 0;                   // merging counts and choosing owners
  uint64_t spill_runs = 0, spilled_bytes = 0;  // exact owners over the memory budget
  int merge_rounds = 0;                        // merge: rounds of temporary parts (--memory)
  // The input slice this build read (see TokenStreamOptions): [begin, end) of total token ids,
  // or of total bytes for text corpora.
  uint64_t range_begin = 0, range_end = 0, range_total = 0;
  bool range_in_bytes = false;
};

// Throws kInvalidArgument/kConfig on bad options (before reading any input), kIo/kCorrupt on
// input problems. On any failure the output path is untouched.
BuildResult Build(const BuildOptions& opts, base::Reporter& reporter);

struct MergeOptions {
  std::vector<std::string> parts;
  std::string output;
  int threads = 0;
  bool partial = false;       // write a part covering the given parts' shards, not a table
  uint64_t memory_bytes = 0;  // bounds the parts open at once (0 = as build's default)
  std::string temp_dir;       // for the rounds' temporary parts ("" = next to the output)
  std::string command_line;
};

// Combines the partial summaries of every shard of one build into the table a one-process build
// writes (same owners, tags, statistics, rows and checksums; only PROVENANCE differs). Throws
// kInvalidArgument naming missing, duplicate or mismatched parts.
BuildResult Merge(const MergeOptions& opts, base::Reporter& reporter);

// Human-readable dry-run summary.
std::string DescribePlan(const BuildResult& r, const BuildOptions& opts);

}  // namespace engram::builder

// `engramctl inspect`: a table's header, layout, sizes, dtype, addressing, checksum and
// journal state (and with stats: occupancy, collisions, load histogram), as text or JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engram::table {

struct InspectOptions {
  bool stats = false;          // scan TAGS/STATS for occupancy and the load histogram
  bool check_metadata = true;  // Open's metadata checksum check
};

struct InspectInfo {
  std::string path;
  uint64_t file_length = 0, base_size = 0;
  uint16_t version_major = 0, version_minor = 0;
  uint64_t created_unix = 0;
  std::string addressing, dtype;
  uint64_t seed = 0;
  std::vector<uint32_t> layer_ids;
  uint32_t max_order = 0, n_heads = 0, row_dim = 0, memory_dim = 0;
  uint64_t buckets_min = 0, buckets_max = 0;  // per sub-table
  uint32_t log2_buckets = 0;
  uint64_t total_rows = 0, subtables = 0;
  uint32_t pad_id = 0, canonical_vocab = 0, tokenizer_vocab = 0;
  uint64_t tokenizer_fingerprint = 0;
  std::vector<int64_t> multipliers;  // deepseek, [layer][k]
  struct Section {
    std::string name;
    uint64_t offset = 0, size = 0;
  };
  std::vector<Section> sections;
  uint32_t chunk_bytes = 0;
  uint64_t n_chunks = 0;
  std::string header_checksum;  // hex
  bool has_stats = false, sketch_owners = false;
  std::string owner_mode;
  // journal
  uint64_t journal_entries = 0, journal_commits = 0, journal_bytes = 0, journal_tail_bytes = 0;
  // the fact ledger (format 3.2 tables only)
  bool has_ledger = false;
  uint64_t ledger_folded = 0, ledger_journal = 0;
  std::string provenance;  // JSON text
  // --stats
  bool stats_scanned = false;
  uint64_t owned_rows = 0;               // rows with an owner tag
  uint64_t collided_rows = 0;            // rows where more than one distinct n-gram landed
  uint64_t occurrences = 0;              // total corpus occurrences over all rows
  uint64_t owner_occurrences = 0;        // of which belong to the owners
  std::vector<uint64_t> load_histogram;  // rows with load 0, 1, 2, ..., 15, >=16
  // Rows with load 0, 1, 2-3, 4-7, ..., [2^(k-1), 2^k): for corpora whose mean load is far above
  // 16. Ends at the highest non-empty bin.
  std::vector<uint64_t> load_log2_histogram;
  uint64_t load_max = 0;
  uint64_t load_sum = 0;  // over all rows (mean = load_sum / total_rows)

  std::string ToText() const;
  std::string ToJson() const;
};

InspectInfo Inspect(const std::string& path, const InspectOptions& opts);

}  // namespace engram::table

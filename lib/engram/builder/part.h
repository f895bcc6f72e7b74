// Partial build summaries for sharded builds (`build --shard I/N` writes one, `merge` combines
// them): a zstd stream holding the resolved layout, the build options that shape the table, and
// either exact (n-gram, count) records sorted per order, or sketch cells of the shard's
// sub-tables. Spec: schemas/build.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/json.h"
#include "engram/format/layout.h"

namespace engram::builder {

inline constexpr char kPartMagic[8] = {'E', 'N', 'G', 'P', 'A', 'R', 'T', '1'};

// What every part of one build must agree on, plus the part's own shard and corpus counts.
struct PartHeader {
  std::string mode;  // exact | sketch
  uint32_t shard_index = 0, shard_count = 1;
  // The shards this part covers: {shard_index} for a shard's own part, several for a part that
  // `merge --partial` combined (the header's "shards"; absent in a single shard's part).
  std::vector<uint32_t> shards;
  uint64_t tokens = 0, documents = 0;
  base::Json options;  // init, seed, std, values, stats, chunk_log2 (an object)
  format::Layout layout;
};

// Serialises the header (magic, JSON, layout, canonical map) for ZstdWriter.
std::string EncodePartHeader(const PartHeader& h);
class ZstdReader;
// Reads and validates a part header from the start of a part stream. Throws kCorrupt.
PartHeader ReadPartHeader(ZstdReader& r);
// The header fields all parts must share, for comparison ("" when equal).
std::string DescribePartMismatch(const PartHeader& a, const PartHeader& b);

}  // namespace engram::builder

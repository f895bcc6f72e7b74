// Owners without counting (--owners sketch): one Boyer-Moore majority cell per row, O(rows)
// memory and no temp disk; deterministic in input order per sub-table; owner counts and loads are
// approximate (schemas/table_format.md §6).
#pragma once

#include <cstdint>
#include <vector>

#include "engram/builder/owner_assigner.h"
#include "engram/builder/token_stream.h"
#include "engram/format/layout.h"

namespace engram::builder {

class ZstdReader;
class ZstdWriter;

// Sketch mode over blocks; Finish() writes tags and STATS (owner_count = the majority vote margin,
// load = a 16-bit linear-counting estimate; both documented as approximate).
class SketchOwners {
 public:
  SketchOwners(const format::Layout& layout, int threads, uint32_t shard_index = 0,
               uint32_t shard_count = 1);
  ~SketchOwners();
  void AddBlock(const TokenBlock& block);
  void Finish(OwnerArrays* arrays) const;
  // Part streams: this shard's sub-tables' cells out; any part's cells in.
  void WriteCells(ZstdWriter& w) const;
  void ReadCells(ZstdReader& r);
  // Sub-tables this shard owns (sketch shards split sub-tables).
  bool Owns(size_t sub) const noexcept { return sub % shard_count_ == shard_index_; }

 private:
  struct Cell {
    uint32_t tag, vote, total;
    uint16_t seen, pad;
  };
  static_assert(sizeof(Cell) == 16);
  const format::Layout& l_;
  int threads_;
  uint32_t shard_index_, shard_count_;
  std::vector<Cell> cells_;
};

}  // namespace engram::builder

// Owners from a merged record stream (schemas/table_format.md §6): the records of one order at a
// time, buffered and applied to every (layer, head) sub-table of that order in parallel chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "engram/format/layout.h"

namespace engram::builder {

// Where owners land: the table's TAGS and (optional) STATS sections, or a heap array of owner
// counts when there are no STATS.
struct OwnerArrays {
  uint32_t* tags = nullptr;
  uint8_t* stats = nullptr;
  std::vector<uint32_t> own;
};

// Applies a merged record stream of one order to the owner cells: rows of all (layer, head)
// sub-tables of that order. Buffers records and assigns in parallel chunks.
class OwnerAssigner {
 public:
  OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads);
  void BeginOrder(uint32_t order);
  void Add(const uint32_t* ids, uint64_t count);
  void Flush();
  uint64_t distinct() const noexcept { return distinct_; }

 private:
  const format::Layout& l_;
  OwnerArrays* oa_;
  int threads_;
  uint32_t order_ = 0;
  size_t n_ = 0;                  // records buffered
  std::vector<uint32_t> ids_;     // kChunk records of order_ ids
  std::vector<uint64_t> counts_;  // kChunk
  std::vector<uint32_t> tags_;    // kChunk, filled by Flush
  uint64_t distinct_ = 0;
};

}  // namespace engram::builder

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

// Consecutive sub-tables [begin, end) in SubIndex order, so rows [first_row, end_row): the
// sub-tables whose owners one pass over the records chooses.
struct OwnerPass {
  size_t begin = 0, end = 0;
  uint64_t first_row = 0, end_row = 0;
  bool Has(size_t sub) const noexcept { return sub >= begin && sub < end; }
  // Whether the pass has a sub-table of order n.
  bool HasOrder(const format::Layout& l, uint32_t n) const;
  // Whether this pass counts the distinct n-grams of order n: exactly one pass does, the one with
  // the order's first sub-table.
  bool CountsOrder(const format::Layout& l, uint32_t n) const {
    return Has(l.spec.SubIndex(0, n, 0));
  }
};

// Owner cells cost 16 bytes a row in a build's packed state (TAGS and STATS take 20 in the
// table, which merge writes directly). A table whose cells exceed `budget` bytes has them chosen in
// several passes over the records, each over consecutive sub-tables within the budget (at least one
// sub-table a pass), so that memory stays bounded however many rows the table has; one pass when
// they fit.
std::vector<OwnerPass> PlanOwnerPasses(const format::Layout& l, uint64_t budget);

// The owner-cell budget within a --memory of `memory` bytes: half of it, at least 64 MiB.
uint64_t OwnerCellBudget(uint64_t memory);

// Applies a merged record stream of one order to the owner cells: rows of all (layer, head)
// sub-tables of that order (within `pass`, when given). Buffers records and assigns in parallel
// chunks.
class OwnerAssigner {
 public:
  OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads,
                const OwnerPass* pass = nullptr);
  void BeginOrder(uint32_t order);
  void Add(const uint32_t* ids, uint64_t count);
  void Flush();

 private:
  const format::Layout& l_;
  OwnerArrays* oa_;
  int threads_;
  const OwnerPass* pass_;
  uint32_t order_ = 0;
  size_t n_ = 0;                  // records buffered
  std::vector<uint32_t> ids_;     // kChunk records of order_ ids
  std::vector<uint64_t> counts_;  // kChunk
  std::vector<uint32_t> tags_;    // kChunk, filled by Flush
};

}  // namespace engram::builder

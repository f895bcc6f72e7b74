// The owner rule (schemas/table_format.md §6) and the cells it is applied to: a row's owner is its
// n-gram with the highest count (ties to the smaller owner tag), and STATS add up occurrences and
// distinct n-grams. Header-only (templates over the cell layout); internal to the builder
// (owner_assigner.cc, exact_counter.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engram/base/endian.h"
#include "engram/base/file.h"
#include "engram/builder/owner_assigner.h"
#include "engram/format/format.h"
#include "engram/format/layout.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

// Records the assigner buffers before applying them in parallel.
inline constexpr size_t kAssignChunk = size_t{1} << 20;

inline uint32_t Sat32(uint64_t v) {
  return v > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<uint32_t>(v);
}

// A row's owner cells: its owner's tag and count, and (STATS) the occurrences and distinct
// n-grams of the row.
struct RowState {
  uint32_t tag, owner_count, total, distinct;
};

// The owner rule (§6): the n-gram with the highest count owns the row, ties to the smaller tag;
// occurrences and distinct n-grams add up (saturating).
inline void Offer(RowState& r, uint32_t tag, uint64_t count) {
  const uint32_t cc = Sat32(count);
  if (cc > r.owner_count || (cc == r.owner_count && tag < r.tag) || r.tag == hash::kNoOwner) {
    r.tag = tag;
    r.owner_count = cc;
  }
  r.total = Sat32(uint64_t{r.total} + count);
  r.distinct = Sat32(uint64_t{r.distinct} + 1);
}

// Reads one byte per cache line of [p, p + bytes), in order.
inline void TouchLines(const void* p, size_t bytes) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += 64) (void)b[i];
}

// The owner cells of the table itself: TAGS and STATS (or the owner-count array), 2 cache lines
// a row.
struct TableCells {
  OwnerArrays* oa;
  RowState Load(uint64_t row) const {
    if (!oa->stats) return {oa->tags[row], oa->own[row], 0, 0};
    const uint8_t* st = oa->stats + row * format::kStatsRowSize;
    return {oa->tags[row], base::LoadLE<uint32_t>(st), base::LoadLE<uint32_t>(st + 4),
            base::LoadLE<uint32_t>(st + 8)};
  }
  void Store(uint64_t row, const RowState& r) const {
    oa->tags[row] = r.tag;
    if (!oa->stats) {
      oa->own[row] = r.owner_count;
      return;
    }
    uint8_t* st = oa->stats + row * format::kStatsRowSize;
    base::StoreLE<uint32_t>(st, r.owner_count);
    base::StoreLE<uint32_t>(st + 4, r.total);
    base::StoreLE<uint32_t>(st + 8, r.distinct);
  }
  // Gives the pages of rows [begin, end) back (the page cache keeps the table's mapped pages), so
  // that they stop counting as resident memory.
  void Release(uint64_t begin, uint64_t end) const {
    base::ReleaseMappedPages(oa->tags + begin, (end - begin) * sizeof(uint32_t));
    if (oa->stats)
      base::ReleaseMappedPages(oa->stats + begin * format::kStatsRowSize,
                               (end - begin) * format::kStatsRowSize);
  }
  // Reads rows [begin, end) in order, a word per cache line, to bring them into the cache.
  void Touch(uint64_t begin, uint64_t end) const {
    TouchLines(oa->tags + begin, (end - begin) * sizeof(uint32_t));
    if (oa->stats)
      TouchLines(oa->stats + begin * format::kStatsRowSize, (end - begin) * format::kStatsRowSize);
    else
      TouchLines(oa->own.data() + begin, (end - begin) * sizeof(uint32_t));
  }
  void Offer(uint64_t row, uint32_t tag, uint64_t count) const {
    RowState r = Load(row);
    builder::Offer(r, tag, count);
    Store(row, r);
  }
};

// The same cells packed 16 bytes a row (four to a cache line), copied into the table at the end:
// rows [first, first + the buffer's rows) of the table.
struct StateCells {
  RowState* rows;
  uint64_t first = 0;
  void Touch(uint64_t begin, uint64_t end) const {
    TouchLines(rows + (begin - first), (end - begin) * sizeof(RowState));
  }
  void Offer(uint64_t row, uint32_t tag, uint64_t count) const {
    builder::Offer(rows[row - first], tag, count);
  }
};

// An offer to a row of one sub-table: its bucket, and the record's owner tag and count.
struct RowOffer {
  uint32_t bucket, tag;
  uint64_t count;
};

// Rows are updated a region at a time: 2^15 rows of packed state (512 KiB) stay in cache and in
// the TLB while their offers are applied, where offers in record order would miss both on almost
// every row (a sub-table's rows span 16 MiB and more).
inline constexpr unsigned kRegionShift = 15;

// Applies m records of order n (ids, counts and owner tags) to the rows of sub-table (li, h):
// a row's owner is its n-gram with the highest count, ties to the smaller tag, and STATS add up.
// The outcome does not depend on the order of the records, nor on how they are split into calls,
// so the offers are first grouped by region of rows (a counting sort), then applied.
template <typename Cells>
inline void ApplyToSubTable(const format::Layout& l, const Cells& cells, size_t li, uint32_t h,
                            uint32_t n, const uint32_t* ids, const uint64_t* counts,
                            const uint32_t* tags, int64_t m) {
  const hash::AddressSpec& s = l.spec;
  const size_t sub = s.SubIndex(li, n, h);
  const uint64_t base_row = l.row_offsets[sub];
  const uint64_t buckets = s.sizes[sub];
  if (buckets > (uint64_t{1} << 32)) {  // buckets beyond 32 bits: in record order
    for (int64_t k = 0; k < m; ++k)
      cells.Offer(base_row + hash::BucketOf(s, li, n, h, ids + k * n), tags[k], counts[k]);
    return;
  }
  const size_t regions = static_cast<size_t>((buckets >> kRegionShift) + 1);
  thread_local std::vector<RowOffer> offers, grouped;
  thread_local std::vector<size_t> at;
  offers.resize(static_cast<size_t>(m));
  grouped.resize(static_cast<size_t>(m));
  at.assign(regions + 1, 0);
  for (int64_t k = 0; k < m; ++k) {
    const auto bucket = static_cast<uint32_t>(hash::BucketOf(s, li, n, h, ids + k * n));
    offers[k] = {bucket, tags[k], counts[k]};
    ++at[(bucket >> kRegionShift) + 1];
  }
  for (size_t r = 1; r <= regions; ++r) at[r] += at[r - 1];
  for (const RowOffer& o : offers) grouped[at[o.bucket >> kRegionShift]++] = o;
  // at[r] is now where region r + 1 starts. A region's rows are read in order first (streamed,
  // at memory bandwidth), so that its offers, in random row order, hit the cache.
  size_t begin = 0;
  for (size_t r = 0; r < regions; ++r) {
    const size_t end = at[r];
    if (end == begin) continue;
    const uint64_t first = base_row + (uint64_t{r} << kRegionShift);
    cells.Touch(first, std::min(base_row + buckets, first + (uint64_t{1} << kRegionShift)));
    for (size_t k = begin; k < end; ++k)
      cells.Offer(base_row + grouped[k].bucket, grouped[k].tag, grouped[k].count);
    begin = end;
  }
}

}  // namespace engram::builder

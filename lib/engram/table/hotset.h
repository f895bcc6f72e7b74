// `engramctl hotset`: how much of a table must be resident. Replays the rows the model reads for a
// corpus (every position, Engram layer, order and head, in reading order) and computes, exactly
// from LRU stack distances (Mattson et al.), the hit rate of an LRU row cache of every size.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engram/format/layout.h"

namespace engram::table {

// Row reads of documents given as canonical ids: for each position, each layer, order and head.
std::vector<uint64_t> RowTrace(const format::Layout& l,
                               const std::vector<std::vector<uint32_t>>& documents);

struct HotsetPoint {
  uint64_t rows = 0;   // cache size in rows
  uint64_t bytes = 0;  // rows x bytes per row
  double hit_rate = 0;
};

struct HotsetResult {
  uint64_t lookups = 0;
  uint64_t distinct_rows = 0;  // = the lookups that touch a row first (no cache can hit them)
  uint64_t bytes_per_row = 0;  // row, its scales (fp8, int8, int4) and owner tag
  uint64_t table_rows = 0;
  // hits_at[d]: lookups whose row was last read d distinct rows ago (an LRU cache of more than d
  // rows hits them).
  std::vector<uint64_t> hits_at;
  std::vector<HotsetPoint> curve;  // at least 20 sizes, log-spaced from 1 row to distinct_rows
  // Hit rate of an LRU cache of `rows` rows, exact.
  double HitRate(uint64_t rows) const;
  // Smallest cache (rows) whose hit rate reaches `rate`; 0 when no size does (first touches).
  uint64_t RowsFor(double rate) const;
  double first_touch() const noexcept {
    return lookups ? static_cast<double>(distinct_rows) / static_cast<double>(lookups) : 0;
  }
  std::string ToText() const;
  std::string ToJson() const;
  std::string ToSvg(const std::string& title) const;
};

// Stack distances of a trace, in O(n log n) (a Fenwick tree over the last read of each row).
HotsetResult Hotset(std::span<const uint64_t> trace, uint64_t bytes_per_row, uint64_t table_rows);

}  // namespace engram::table

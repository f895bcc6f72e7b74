// The complete, self-describing layout of a table: addressing, row geometry, canonical-id map.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/hash/addressing.h"

namespace engram::format {

struct Layout {
  hash::AddressSpec spec;  // with derived fields filled
  uint32_t row_dim = 0;    // values per row
  base::DType dtype = base::DType::kF32;
  std::vector<uint64_t> row_offsets;  // per sub-table (spec.SubIndex order)
  uint64_t total_rows = 0;
  uint64_t owner_tag_seed = 0;
  std::vector<uint32_t> canon_map;     // tokenizer id -> canonical id; empty = identity
  uint64_t tokenizer_fingerprint = 0;  // 0 = built without a tokenizer

  uint32_t row_stride() const noexcept {
    return static_cast<uint32_t>(base::RowBytes(dtype, row_dim));
  }
  uint32_t scale_stride() const noexcept {
    return static_cast<uint32_t>(base::ScaleBytes(dtype, row_dim));
  }
  // Whether the rows need a 3.4 reader (format.h kReqV34Rows): int8/int4 rows, or fp8 rows whose
  // last scale block is short.
  bool needs_v34_rows() const noexcept {
    return base::IsIntDType(dtype) ||
           (dtype == base::DType::kF8E4M3 && row_dim % base::kFp8BlockSize != 0);
  }
  uint64_t rows_bytes() const noexcept { return total_rows * row_stride(); }
  uint64_t RowOf(size_t sub, uint64_t bucket) const noexcept { return row_offsets[sub] + bucket; }
  // The first row of sub-table `sub` (spec.SubIndex order); total_rows past the last one.
  uint64_t SubtableBegin(size_t sub) const noexcept {
    return sub < row_offsets.size() ? row_offsets[sub] : total_rows;
  }
  uint64_t SubtableRows(size_t sub) const noexcept {
    return SubtableBegin(sub + 1) - SubtableBegin(sub);
  }
  // The sub-table that row `row` (< total_rows) lies in: the last one that begins at or before it.
  size_t SubtableOf(uint64_t row) const noexcept {
    return static_cast<size_t>(std::upper_bound(row_offsets.begin(), row_offsets.end(), row) -
                               row_offsets.begin()) -
           1;
  }
  // Maps a tokenizer id to its canonical id (identity without a map). Returns false when the id
  // is outside the tokenizer's vocabulary.
  bool Canonical(uint32_t token_id, uint32_t* out) const noexcept {
    if (canon_map.empty()) {
      *out = token_id;
      return token_id < spec.canonical_vocab;
    }
    if (token_id >= canon_map.size()) return false;
    *out = canon_map[token_id];
    return true;
  }
  // Memory vector width: rows of all (order, head) pairs concatenated.
  uint32_t memory_dim() const noexcept { return row_dim * static_cast<uint32_t>(spec.per_layer()); }
};

// Derives spec's fields, checks the geometry and computes row offsets. Throws kInvalidArgument.
Layout MakeLayout(hash::AddressSpec spec, uint32_t row_dim, base::DType dtype,
                  std::vector<uint32_t> canon_map = {}, uint64_t tokenizer_fingerprint = 0);

// LAYOUT section (schemas/table_format.md §3.1).
std::basic_string<uint8_t> EncodeLayoutSection(const Layout& layout);
// Parses a LAYOUT section into layout (whose header-derived scalar fields are already set),
// checking its size against the header's counts. Throws kCorrupt.
void DecodeLayoutSection(std::span<const uint8_t> bytes, Layout* layout);

// Checks a canonical map: map[0] = 0, first-seen order, max = canonical_vocab - 1. Returns an
// empty string or the first problem.
std::string CheckCanonMap(std::span<const uint32_t> map, uint32_t canonical_vocab);

// One line per sub-table group, for inspect: "layer 1: orders 2..3 x 8 heads, 16 sub-tables, ...".
std::string DescribeLayout(const Layout& layout);

}  // namespace engram::format

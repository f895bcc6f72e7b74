// Layout construction and the LAYOUT section codec (schemas/table_format.md §3.1).
#include "engram/format/layout.h"

#include <sstream>

#include "engram/base/checked.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/format/format.h"
#include "engram/hash/ngram_hash.h"

namespace engram::format {

using base::LoadLE;

Layout MakeLayout(hash::AddressSpec spec, uint32_t row_dim, base::DType dtype,
                  std::vector<uint32_t> canon_map, uint64_t tokenizer_fingerprint) {
  if (!canon_map.empty()) {
    uint32_t mx = 0;
    for (uint32_t v : canon_map) mx = std::max(mx, v);
    spec.canonical_vocab = mx + 1;
  }
  hash::Derive(&spec);
  ENGRAM_CHECK(row_dim >= 1 && row_dim <= kMaxRowDim, Code::kInvalidArgument,
               "row width = " << row_dim << " values: must be in 1.." << kMaxRowDim
                              << " (row width = embed_dim / n_heads)");
  Layout l;
  l.spec = std::move(spec);
  l.row_dim = row_dim;
  l.dtype = dtype;
  l.canon_map = std::move(canon_map);
  l.tokenizer_fingerprint = tokenizer_fingerprint;
  l.owner_tag_seed = hash::OwnerTagSeed(l.spec.seed);
  l.row_offsets.resize(l.spec.n_subtables());
  uint64_t total = 0;
  for (size_t i = 0; i < l.spec.sizes.size(); ++i) {
    l.row_offsets[i] = total;
    auto next = base::CheckedAdd(total, l.spec.sizes[i]);
    ENGRAM_CHECK(next.has_value(), Code::kInvalidArgument, "table rows overflow 64 bits");
    total = *next;
  }
  auto bytes = base::CheckedMul(total, base::RowBytes(dtype, l.row_dim));
  ENGRAM_CHECK(bytes.has_value() && *bytes < (uint64_t{1} << 56), Code::kInvalidArgument,
               "table of " << total << " rows x " << row_dim << " values is too large");
  l.total_rows = total;
  return l;
}

std::basic_string<uint8_t> EncodeLayoutSection(const Layout& l) {
  base::ByteWriter w;
  for (uint32_t id : l.spec.layer_ids) w.Put<uint32_t>(id);
  w.PadTo(8);
  if (l.spec.mode == hash::AddressingMode::kDeepSeek) {
    for (uint64_t b : l.spec.base_sizes) w.Put<uint64_t>(b);
    for (int64_t m : l.spec.multipliers) w.Put<int64_t>(m);
  }
  for (size_t i = 0; i < l.spec.n_subtables(); ++i) {
    w.Put<uint64_t>(l.spec.sizes[i]);
    w.Put<uint64_t>(l.row_offsets[i]);
    w.Put<uint64_t>(l.spec.mode == hash::AddressingMode::kNative ? l.spec.seeds[i] : 0);
  }
  return std::move(w.bytes());
}

void DecodeLayoutSection(std::span<const uint8_t> b, Layout* l) {
  hash::AddressSpec& s = l->spec;
  const uint64_t n_layers = s.layer_ids.size();
  const uint64_t n_orders = s.max_order - 1;
  const uint64_t n_sub = n_layers * n_orders * s.n_heads;
  const bool deepseek = s.mode == hash::AddressingMode::kDeepSeek;
  uint64_t expect = base::AlignUp(n_layers * 4, 8) +
                    (deepseek ? n_orders * 8 + n_layers * s.max_order * 8 : 0) + n_sub * 24;
  ENGRAM_CHECK(b.size() == expect, Code::kCorrupt,
               "LAYOUT section is " << b.size() << " bytes, the header's layout needs " << expect);
  size_t p = 0;
  for (uint64_t i = 0; i < n_layers; ++i, p += 4) s.layer_ids[i] = LoadLE<uint32_t>(b.data() + p);
  p = base::AlignUp(p, 8);
  s.base_sizes.clear();
  s.multipliers.clear();
  if (deepseek) {
    for (uint64_t i = 0; i < n_orders; ++i, p += 8)
      s.base_sizes.push_back(LoadLE<uint64_t>(b.data() + p));
    for (uint64_t i = 0; i < n_layers * s.max_order; ++i, p += 8)
      s.multipliers.push_back(LoadLE<int64_t>(b.data() + p));
  }
  s.sizes.resize(n_sub);
  l->row_offsets.resize(n_sub);
  s.seeds.clear();
  for (uint64_t i = 0; i < n_sub; ++i, p += 24) {
    s.sizes[i] = LoadLE<uint64_t>(b.data() + p);
    l->row_offsets[i] = LoadLE<uint64_t>(b.data() + p + 8);
    if (!deepseek) s.seeds.push_back(LoadLE<uint64_t>(b.data() + p + 16));
  }
}

std::string CheckCanonMap(std::span<const uint32_t> map, uint32_t canonical_vocab) {
  if (map.empty()) return {};
  if (map[0] != 0) return "canonical id of token 0 is " + std::to_string(map[0]) + ", must be 0";
  uint32_t mx = 0;
  for (size_t i = 1; i < map.size(); ++i) {
    if (map[i] > mx + 1)
      return "canonical id of token " + std::to_string(i) + " is " + std::to_string(map[i]) +
             ", but ids must appear in first-seen order (at most " + std::to_string(mx + 1) + ")";
    mx = std::max(mx, map[i]);
  }
  if (mx + 1 != canonical_vocab)
    return "canonical map has " + std::to_string(mx + 1) + " distinct ids, header says " +
           std::to_string(canonical_vocab);
  return {};
}

std::string DescribeLayout(const Layout& l) {
  std::ostringstream os;
  const auto& s = l.spec;
  for (size_t li = 0; li < s.n_layers(); ++li) {
    uint64_t rows = 0;
    for (size_t k = 0; k < s.per_layer(); ++k) rows += s.sizes[li * s.per_layer() + k];
    os << "layer " << s.layer_ids[li] << ": orders 2.." << s.max_order << " x " << s.n_heads
       << " heads, rows " << l.row_offsets[li * s.per_layer()] << ".."
       << l.row_offsets[li * s.per_layer()] + rows << " (" << rows << " rows)\n";
  }
  return os.str();
}

}  // namespace engram::format

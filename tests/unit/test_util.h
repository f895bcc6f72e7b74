// Helpers shared by the unit tests of the table modules (format, builder, table): temp
// directories, small layouts and tables, file mutation.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/reporter.h"
#include "engram/format/format.h"
#include "engram/format/layout.h"
#include "engram/format/reader.h"
#include "engram/format/writer.h"

namespace engram::testing {

class TempDir {
 public:
  TempDir() {
    char buf[] = "/tmp/engram_test_XXXXXX";
    path_ = ::mkdtemp(buf);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline format::Layout SmallLayout(base::DType dtype = base::DType::kF32,
                                  hash::AddressingMode mode = hash::AddressingMode::kNative,
                                  uint32_t log2 = 6, uint32_t row_dim = 32,
                                  std::vector<uint32_t> layers = {1}, uint32_t order = 2,
                                  uint32_t heads = 1) {
  hash::AddressSpec s;
  s.mode = mode;
  s.layer_ids = std::move(layers);
  s.max_order = order;
  s.n_heads = heads;
  s.canonical_vocab = 1000;
  s.log2_buckets = log2;
  s.base_sizes = {uint64_t{1} << log2};
  return format::MakeLayout(s, row_dim, dtype);
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::string s = base::ReadFileToString(path, 1ull << 32);
  return std::vector<uint8_t>(s.begin(), s.end());
}

inline void WriteAll(const std::string& path, const std::vector<uint8_t>& bytes) {
  base::UniqueFd fd = base::OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC);
  base::PwriteFull(fd.get(), bytes.data(), bytes.size(), 0, path);
}

// Decodes the header, lets f change it, re-encodes it with a valid checksum.
inline void MutateHeader(const std::string& path, const std::function<void(format::Header&)>& f) {
  auto bytes = ReadAll(path);
  format::Header h = format::DecodeHeader(bytes.data());
  f(h);
  format::EncodeHeader(h, bytes.data());
  WriteAll(path, bytes);
}

// Writes a table whose row r holds values f(r, i), tags r+1 (0 for every 3rd row).
inline void WriteTable(const std::string& path, const format::Layout& l, bool stats = true,
                       std::vector<uint64_t> implausible_stats_rows = {}, uint32_t chunk_log2 = 12,
                       std::vector<uint64_t> nan_rows = {},
                       std::vector<std::pair<uint64_t, uint8_t>> first_scale_of = {}) {
  format::WriterOptions o;
  o.with_stats = stats;
  o.chunk_log2 = chunk_log2;
  format::TableWriter w(path, l, o);
  std::vector<float> v(l.row_dim);
  for (uint64_t r = 0; r < l.total_rows; ++r) {
    for (uint32_t i = 0; i < l.row_dim; ++i)
      v[i] = std::sin(0.1f * static_cast<float>(r * 31 + i)) * (1.0f + r % 5);
    base::EncodeRow(l.dtype, v, w.rows() + r * l.row_stride(),
                    l.scale_stride() ? w.scales() + r * l.scale_stride() : nullptr);
    w.tags()[r] = r % 3 ? static_cast<uint32_t>(r + 1) : 0;
    if (stats) {
      uint8_t* s = w.stats() + r * format::kStatsRowSize;
      uint32_t vals[3] = {r % 3 ? 2u : 0u, r % 3 ? 3u : 0u, r % 3 ? 2u : 0u};
      std::memcpy(s, vals, 12);
    }
  }
  for (uint64_t r : nan_rows) {  // a NaN in the row's last value
    uint8_t* v = w.rows() + r * l.row_stride() + base::RowBytes(l.dtype, l.row_dim - 1);
    if (l.dtype == base::DType::kF32) std::memcpy(v, "\x00\x00\xC0\x7F", 4);
    if (l.dtype == base::DType::kBF16) std::memcpy(v, "\xC0\x7F", 2);
    if (l.dtype == base::DType::kF8E4M3) *v = 0x7F;
  }
  for (auto [r, scale] : first_scale_of) w.scales()[r * l.scale_stride()] = scale;  // fp8
  for (uint64_t r : implausible_stats_rows) {  // owner count above the bucket's total
    uint32_t vals[3] = {9, 3, 2};
    std::memcpy(w.stats() + r * format::kStatsRowSize, vals, 12);
  }
  w.SetProvenance("{\"creator\":\"test\"}");
  w.Commit(base::Silent());
}

// Layer 1, bigrams, one head, 100 canonical ids: the verify tests' tables.
inline hash::AddressSpec BigramSpec(uint32_t log2_buckets) {
  hash::AddressSpec s;
  s.layer_ids = {1};
  s.max_order = 2;
  s.n_heads = 1;
  s.log2_buckets = log2_buckets;
  s.canonical_vocab = 100;
  return s;
}

inline std::string OpenError(const std::string& path, Code* code = nullptr) {
  try {
    format::Reader::Open(path);
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace engram::testing

// Helpers shared by the table tests: temp directories, small layouts, file mutation.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/base/file.h"
#include "engram/format/format.h"
#include "engram/format/layout.h"

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

}  // namespace engram::testing

// Streaming zstd compression to and decompression from files (spill runs and shard summaries).
// The build module is the only user of zstd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engram/base/file.h"

namespace engram::builder {

class ZstdWriter {
 public:
  // Creates `path` (O_EXCL unless truncate). level: zstd level (1 = fast).
  ZstdWriter(const std::string& path, int level = 1);
  ~ZstdWriter();
  void Write(const void* data, size_t n);
  // Flushes the frame, fsyncs (optional) and closes; throws kIo (disk full names the path).
  void Close(bool fsync);
  uint64_t compressed_bytes() const noexcept { return written_; }

 private:
  void Drain(bool end);
  std::string path_;
  base::UniqueFd fd_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t written_ = 0;
};

class ZstdReader {
 public:
  explicit ZstdReader(const std::string& path);
  ~ZstdReader();
  // Reads up to n bytes; returns how many (0 at the end of the stream).
  size_t Read(void* out, size_t n);
  // Reads exactly n bytes or throws kCorrupt "truncated".
  void ReadExact(void* out, size_t n);
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  base::UniqueFd fd_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram::builder

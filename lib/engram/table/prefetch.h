// `engramctl prefetch`: make a table resident in the page cache (vmtouch-class), report residency
// (mincore), pin it (mlock) or evict it (fadvise DONTNEED). `run` uses Warm() when
// [engram.table] prefetch = true.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/base/reporter.h"

namespace engram::table {

struct Residency {
  std::string path;
  uint64_t bytes = 0, resident_bytes = 0;
  struct Part {
    std::string name;
    uint64_t offset = 0, bytes = 0, resident_bytes = 0;
  };
  std::vector<Part> parts;  // header, each section, journal
  std::string ToText() const;
  std::string ToJson() const;
};

// Residency of every page of a table, per section. Throws as Reader::Open for anything else.
Residency Status(const std::string& path);

struct WarmResult {
  uint64_t bytes = 0;             // file size
  uint64_t already_resident = 0;  // before
  uint64_t resident = 0;          // after
  uint64_t read_bytes = 0;        // bytes we asked the kernel to bring in
  double seconds = 0;
};

// Brings every non-resident page of the file into the page cache with `threads` parallel readers,
// touching only ranges not resident already. Progress counts bytes actually resident.
WarmResult Warm(const std::string& path, int threads, base::Reporter& reporter);

// Drops the file's pages from the page cache (only pages no process maps or dirties can go).
// Returns resident bytes after.
uint64_t Evict(const std::string& path);

// Pins the whole file in memory (mmap + mlock) for its lifetime. Throws kIo with the fix when
// the memlock limit is too low.
class ResidentLock {
 public:
  explicit ResidentLock(const std::string& path);
  ~ResidentLock();
  uint64_t bytes() const noexcept { return map_.size(); }

 private:
  base::MappedFile map_;
};

}  // namespace engram::table

// `engramctl prefetch`: make a table resident in the page cache (vmtouch-class), report residency
// (mincore), pin it (mlock) or evict it (fadvise DONTNEED). `run` uses Warm() when
// [engram.table] prefetch = true.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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

// Warms at most `budget` bytes of a table, hottest first: the header and metadata, then the
// sections every lookup reads beside its row (TAGS, and SCALES for the scaled dtypes), then the
// pages of ROWS in order of the build corpus's lookups that land on them (STATS total_count), for a
// table that cannot be resident whole; or, given `hot_rows` (the row reads of a trace: hotset's
// RowTrace of `serve --trace` or a corpus), in order of that trace's reads. Throws kInvalidArgument
// for a table without STATS when no trace is given.
struct BudgetResult {
  uint64_t budget = 0;
  uint64_t bytes = 0;         // file size
  uint64_t warmed_bytes = 0;  // chosen pages (resident after)
  uint64_t always_bytes = 0;  // of which header, metadata, TAGS, SCALES
  uint64_t row_pages = 0, row_pages_total = 0;
  double lookup_share = 0;  // of STATS total_count (or of the trace's reads) on the chosen pages
  bool from_trace = false;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // chosen (offset, length), file order
  double seconds = 0;
};
BudgetResult WarmHottest(const std::string& path, uint64_t budget, int threads,
                         base::Reporter& reporter, std::span<const uint64_t> hot_rows = {});

// Drops the file's pages from the page cache (only pages no process maps or dirties can go).
// Returns resident bytes after.
uint64_t Evict(const std::string& path);

// Pins the whole file (or some ranges) in memory (mmap + mlock) for its lifetime. Throws kIo with
// the fix when the memlock limit is too low.
// Checks before any work that `bytes` can be locked (RLIMIT_MEMLOCK, or CAP_IPC_LOCK as root):
// kIo naming the limit and the fix.
void CheckLockable(const std::string& path, uint64_t bytes);
class ResidentLock {
 public:
  explicit ResidentLock(const std::string& path);
  // Only these (offset, length) ranges (prefetch --budget --lock).
  ResidentLock(const std::string& path, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
  ~ResidentLock();
  uint64_t bytes() const noexcept { return locked_; }

 private:
  base::MappedFile map_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  uint64_t locked_ = 0;
};

}  // namespace engram::table

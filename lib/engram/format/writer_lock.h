// The table writers' lock: an exclusive flock on the table file, re-taken when a fold replaced
// the file while we waited (the path must name the inode we locked), as schemas/table_format.md
// §5.5 requires.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engram/base/file.h"
#include "engram/base/reporter.h"

namespace engram::format {

class WriterLock {
 public:
  // Opens `path` (O_RDWR), locks it (waiting unless wait == false: then kIo at once, naming the
  // flag to drop) and checks the path still names the locked file.
  // read_only: lock a table that is only read (sort-buckets -o), so a read-only file works.
  // reporter (optional) is told, once, that the lock is held and by whom, before this waits.
  WriterLock(const std::string& path, bool wait, std::string_view what_for, bool read_only = false,
             base::Reporter* reporter = nullptr);
  ~WriterLock();
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  int fd() const noexcept { return fd_.get(); }

 private:
  base::UniqueFd fd_;
  std::unique_ptr<base::FileLock> lock_;
};

// Removes "<path>.tmp.<pid>" files left by processes that no longer run (a SIGKILLed build or
// fold). Call with the writer lock held.
void RemoveStaleTempFiles(const std::string& path);

}  // namespace engram::format

// The fold lock (schemas/table_format.md §5.8): open-file-description locks on two bytes far past
// the end of a table file, apart from the writers' flock. Readers hold the data byte shared while
// they read rows (a request, or a whole command); an in-place fold holds it exclusively while it
// changes the base, so no reader ever sees a row half written or rows of two states in one
// request. The fold first takes the turnstile byte, which long-lived readers (serve) check before
// each request, so a steady stream of requests cannot starve it.
#pragma once

#include <string>

#include "engram/base/reporter.h"

namespace engram::format {

class FoldReadLock {
 public:
  FoldReadLock() = default;
  // Blocks while a fold holds the table. yield: first wait for a fold that is waiting for
  // readers to finish (a server between requests); never use it while holding another
  // FoldReadLock on the same file.
  explicit FoldReadLock(int fd, bool yield = false);
  ~FoldReadLock();
  FoldReadLock(FoldReadLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FoldReadLock& operator=(FoldReadLock&& o) noexcept;
  FoldReadLock(const FoldReadLock&) = delete;
  FoldReadLock& operator=(const FoldReadLock&) = delete;
  bool held() const noexcept { return fd_ >= 0; }

 private:
  void Release() noexcept;
  int fd_ = -1;  // a duplicate of the caller's descriptor, owned
};

class FoldWriteLock {
 public:
  // fd must be open for writing. Waits for readers unless wait == false (then kIo naming
  // --no-wait); tells the reporter once that it waits.
  FoldWriteLock(int fd, const std::string& path, bool wait, base::Reporter* reporter);
  ~FoldWriteLock();
  FoldWriteLock(const FoldWriteLock&) = delete;
  FoldWriteLock& operator=(const FoldWriteLock&) = delete;

 private:
  int fd_;
};

}  // namespace engram::format

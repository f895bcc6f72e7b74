// OFD locks (F_OFD_SETLKW): owned by the open file description, so threads of one process and
// the writers' flock never interfere with them, and a process that dies drops them.
#include "engram/format/fold_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engram/base/error.h"
#include "engram/base/interrupt.h"

namespace engram::format {

namespace {

// Far past any table's end; fcntl locks may lie beyond EOF.
constexpr off_t kTurnstileByte = off_t{1} << 62;
constexpr off_t kDataByte = kTurnstileByte + 1;

bool Lock(int fd, off_t at, short type, bool wait) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  for (;;) {
    if (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0) return true;
    if (errno == EINTR) {
      base::ThrowIfInterrupted();  // Ctrl-C while waiting
      continue;
    }
    if (!wait && (errno == EAGAIN || errno == EACCES)) return false;
    ENGRAM_THROW(Code::kIo,
                 "cannot lock a table file for reading or folding: " << std::strerror(errno));
  }
}

void Unlock(int fd, off_t at) {
  struct flock fl {};
  fl.l_type = F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  ::fcntl(fd, F_OFD_SETLK, &fl);
}

// True when another description holds a lock on `at` that conflicts with `type`.
bool Conflicts(int fd, off_t at, short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return false;
  return fl.l_type != F_UNLCK;
}

}  // namespace

FoldReadLock::FoldReadLock(int fd, bool yield) {
  if (fd < 0) return;
  // A duplicate shares the open file description, and so the lock, and keeps both alive when
  // the caller closes its descriptor first (a view replaced while a request still runs).
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0)
    ENGRAM_THROW(Code::kIo, "cannot lock a table file for reading: " << std::strerror(errno));
  try {
    if (yield && Conflicts(fd_, kTurnstileByte, F_RDLCK)) {  // a fold waits: let it go first
      Lock(fd_, kTurnstileByte, F_RDLCK, true);
      Unlock(fd_, kTurnstileByte);
    }
    Lock(fd_, kDataByte, F_RDLCK, true);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

FoldReadLock::~FoldReadLock() { Release(); }

void FoldReadLock::Release() noexcept {
  if (fd_ < 0) return;
  Unlock(fd_, kDataByte);
  ::close(fd_);
  fd_ = -1;
}

FoldReadLock& FoldReadLock::operator=(FoldReadLock&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FoldWriteLock::FoldWriteLock(int fd, const std::string& path, bool wait, base::Reporter* reporter)
    : fd_(fd) {
  // Writers already exclude each other (flock); the turnstile is only ever waited on by readers.
  Lock(fd, kTurnstileByte, F_WRLCK, true);
  if (!Lock(fd, kDataByte, F_WRLCK, false)) {
    if (!wait) {
      Unlock(fd, kTurnstileByte);
      ENGRAM_THROW(Code::kIo, path << " is being read (a request of serve, or run, lookup, verify, "
                                      "export); run again when it ends, or drop --no-wait");
    }
    if (reporter)
      reporter->Log(base::LogLevel::kInfo,
                    path +
                        " is being read (serve, run, lookup, verify, export); the fold waits "
                        "for the requests in progress to end");
    try {
      Lock(fd, kDataByte, F_WRLCK, true);
    } catch (...) {
      Unlock(fd, kTurnstileByte);
      throw;
    }
  }
}

FoldWriteLock::~FoldWriteLock() {
  Unlock(fd_, kDataByte);
  Unlock(fd_, kTurnstileByte);
}

}  // namespace engram::format

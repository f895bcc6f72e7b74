// POSIX file helpers: every syscall failure becomes an engram::Error naming the path.
#include "engram/base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/interrupt.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"

namespace engram::base {
namespace {

std::string Errno(int e) { return std::strerror(e); }

[[noreturn]] void ThrowIo(const std::string& what, const std::string& path, int e) {
  std::string hint;
  if (e == ENOSPC || e == EDQUOT) hint = "; the disk is full: free space or choose another path";
  if (e == EACCES || e == EPERM || e == EROFS) hint = "; check the permissions of the path";
  if (e == ENOENT) {
    hint = "; check the path";
    // A file in a directory that does not exist: name the directory.
    if (const std::string dir = DirName(path); !PathExists(dir))
      hint = "; the directory " + dir + " does not exist" +
             (what == "create" ? ": create it (mkdir -p " + dir + ") or choose another path"
                               : std::string());
  }
  if (e == EISDIR) hint = "; give a file, not a directory";
  ENGRAM_THROW(Code::kIo, path << ": " << what << " failed: " << Errno(e) << hint);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.Release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

void UniqueFd::Close(const std::string& path_for_errors) {
  if (fd_ < 0) return;
  int fd = Release();
  if (::close(fd) != 0) ThrowIo("close", path_for_errors, errno);
}

void RequireNotPipe(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;  // open() reports the missing file
  ENGRAM_CHECK(!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode), Code::kInvalidArgument,
               path << " is a " << (S_ISFIFO(st.st_mode) ? "named pipe (FIFO)" : "socket")
                    << ", not a regular file; engramctl reads its files by offset: write the data "
                       "to a regular file and give that");
}

SpooledInput::SpooledInput(std::string path, uint64_t max_bytes) : path_(std::move(path)) {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return;
  // A pipe, FIFO, socket or character device: read it as a stream.
  int in;
  do {
    in = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  } while (in < 0 && errno == EINTR);
  if (in < 0) ThrowIo("open", path_, errno);
  UniqueFd in_fd(in);
  const char* dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/engramctl-input.XXXXXX";
  int out = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (out < 0) ThrowIo("create", tmpl, errno);
  UniqueFd out_fd(out);
  temp_ = tmpl;
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  try {
    for (;;) {
      ssize_t n = ::read(in_fd.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ThrowIo("read", path_, errno);
      if (n == 0) break;
      total += static_cast<uint64_t>(n);
      ENGRAM_CHECK(total <= max_bytes, Code::kInvalidArgument,
                   path_ << " streams more than " << max_bytes
                         << " bytes, more than this kind of input may hold");
      PwriteFull(out_fd.get(), buf.data(), static_cast<size_t>(n), total - n, temp_);
    }
  } catch (...) {
    ::unlink(temp_.c_str());
    throw;
  }
  path_ = temp_;
}

SpooledInput::~SpooledInput() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void RequireParentDir(const std::string& path) {
  const std::string dir = DirName(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) ThrowIo("create", path, errno);
  if (!S_ISDIR(st.st_mode)) ThrowIo("create", path, ENOTDIR);
}

UniqueFd OpenFile(const std::string& path, int flags, mode_t mode) {
  // open() of a FIFO blocks until a writer appears: check the type first, without blocking.
  RequireNotPipe(path);
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) ThrowIo("open", path, errno);
  return UniqueFd(fd);
}

uint64_t RegularFileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) ThrowIo("stat", path, errno);
  ENGRAM_CHECK(!S_ISDIR(st.st_mode), Code::kInvalidArgument,
               path << " is a directory; give the path of a file");
  ENGRAM_CHECK(S_ISREG(st.st_mode), Code::kInvalidArgument,
               path << " is not a regular file (device, pipe or socket); give a regular file");
  return static_cast<uint64_t>(st.st_size);
}

size_t PreadSome(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  auto* p = static_cast<uint8_t*>(buf);
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      ThrowIo("read", path, errno);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

void PreadFull(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t got = PreadSome(fd, buf, n, offset, path);
  ENGRAM_CHECK(got == n, Code::kCorrupt,
               path << ": truncated: wanted " << n << " bytes at offset " << offset
                    << ", file ends after " << got);
}

void PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  const auto* p = static_cast<const uint8_t*>(buf);
  while (done < n) {
    ssize_t r = ::pwrite(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      ThrowIo("write", path, errno);
    }
    if (r == 0) ThrowIo("write", path, ENOSPC);
    done += static_cast<size_t>(r);
  }
}

void Fsync(int fd, const std::string& path) {
  if (::fsync(fd) != 0) ThrowIo("fsync", path, errno);
}

void FsyncDir(const std::string& dir) {
  UniqueFd fd = OpenFile(dir, O_RDONLY | O_DIRECTORY);
  // Some filesystems (e.g. some FUSE and tmpfs setups) refuse fsync on directories with EINVAL;
  // there is nothing more durable we can do there.
  if (::fsync(fd.get()) != 0 && errno != EINVAL) ThrowIo("fsync", dir, errno);
}

void Truncate(int fd, uint64_t size, const std::string& path) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) ThrowIo("truncate", path, errno);
}

std::string ReadFileToString(const std::string& path, uint64_t max_bytes) {
  UniqueFd fd = OpenFile(path, O_RDONLY);
  uint64_t size = RegularFileSize(fd.get(), path);
  ENGRAM_CHECK(size <= max_bytes, Code::kInvalidArgument,
               path << " is " << size << " bytes, more than the " << max_bytes
                    << " bytes allowed for this kind of file");
  std::string out(size, '\0');
  size_t got = PreadSome(fd.get(), out.data(), size, 0, path);
  out.resize(got);
  return out;
}

void ForEachLine(const std::string& path, size_t max_line,
                 const std::function<void(size_t, std::string_view, bool)>& fn) {
  RequireNotPipe(path);
  UniqueFd fd = OpenFile(path, O_RDONLY);
  RegularFileSize(fd.get(), path);
  constexpr size_t kChunk = 1 << 20;
  std::vector<char> chunk(kChunk);
  std::string line;
  bool too_long = false;
  size_t line_no = 0;
  uint64_t off = 0;
  auto finish = [&] {
    ++line_no;
    if (!too_long && !line.empty() && line.back() == '\r') line.pop_back();
    fn(line_no, too_long ? std::string_view() : std::string_view(line), too_long);
    line.clear();
    too_long = false;
  };
  for (;;) {
    size_t got = PreadSome(fd.get(), chunk.data(), kChunk, off, path);
    if (got == 0) break;
    off += got;
    for (size_t p = 0; p < got;) {
      const char* nl = static_cast<const char*>(std::memchr(chunk.data() + p, '\n', got - p));
      size_t end = nl ? static_cast<size_t>(nl - chunk.data()) : got;
      if (!too_long) {
        if (line.size() + (end - p) > max_line) {
          too_long = true;
          line.clear();
          line.shrink_to_fit();
        } else {
          line.append(chunk.data() + p, end - p);
        }
      }
      if (!nl) break;
      finish();
      p = end + 1;
    }
  }
  if (too_long || !line.empty()) finish();
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string ExecutablePath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool PathExists(const std::string& path) noexcept {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

MappedFile MappedFile::Open(const std::string& path, Mode mode) {
  UniqueFd fd = OpenFile(path, mode == Mode::kReadOnly ? O_RDONLY : O_RDWR);
  uint64_t size = RegularFileSize(fd.get(), path);
  return FromFd(fd.get(), size, mode, path);
}

MappedFile MappedFile::FromFd(int fd, uint64_t size, Mode mode, const std::string& path) {
  MappedFile m;
  m.path_ = path;
  m.size_ = size;
  if (size == 0) return m;
  int prot = mode == Mode::kReadOnly ? PROT_READ : (PROT_READ | PROT_WRITE);
  void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    if (e == ENOMEM)
      ENGRAM_THROW(Code::kIo, path << ": mapping its " << FormatBytes(size)
                                   << " failed: not enough address space" << MemoryLimitHint());
    ThrowIo("mmap", path, e);
  }
  m.data_ = static_cast<uint8_t*>(p);
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

namespace {
void Advise(const uint8_t* base, uint64_t size, uint64_t offset, uint64_t len, int advice) {
  if (!base || offset >= size) return;
  if (len > size - offset) len = size - offset;
  long page = ::sysconf(_SC_PAGESIZE);
  uint64_t start = offset & ~static_cast<uint64_t>(page - 1);
  ::madvise(const_cast<uint8_t*>(base) + start, len + (offset - start), advice);
}
}  // namespace

void MappedFile::AdviseSequential(uint64_t offset, uint64_t len) const noexcept {
  Advise(data_, size_, offset, len, MADV_SEQUENTIAL);
}
void MappedFile::AdviseRandom(uint64_t offset, uint64_t len) const noexcept {
  Advise(data_, size_, offset, len, MADV_RANDOM);
}
void MappedFile::AdviseNormal(uint64_t offset, uint64_t len) const noexcept {
  Advise(data_, size_, offset, len, MADV_NORMAL);
}
void MappedFile::AdviseWillNeed(uint64_t offset, uint64_t len) const noexcept {
  Advise(data_, size_, offset, len, MADV_WILLNEED);
}

void MappedFile::Sync() {
  if (data_ && ::msync(data_, size_, MS_SYNC) != 0) ThrowIo("msync", path_, errno);
}

TempFile::TempFile(std::string final_path) : final_path_(std::move(final_path)) {
  temp_path_ = final_path_ + ".tmp." + std::to_string(::getpid());
  // A stale temp file of ours from an earlier crashed process with the same pid is garbage.
  ::unlink(temp_path_.c_str());
  RequireParentDir(final_path_);
  fd_ = OpenFile(temp_path_, O_RDWR | O_CREAT | O_EXCL, 0644);
}

TempFile::TempFile(TempFile&& o) noexcept
    : final_path_(std::move(o.final_path_)),
      temp_path_(std::move(o.temp_path_)),
      fd_(std::move(o.fd_)),
      committed_(std::exchange(o.committed_, true)) {}

TempFile::~TempFile() {
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void TempFile::Commit() {
  Fsync(fd_.get(), temp_path_);
  fd_.Close(temp_path_);
  CrashPoint("before-rename");
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) ThrowIo("rename", final_path_, errno);
  committed_ = true;
  FsyncDir(DirName(final_path_));
}

namespace {
// A /proc file (its size reads as 0, so it is read to its end), or "" when unreadable.
std::string ReadProc(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while (out.size() < limit && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
  ::close(fd);
  return out;
}

// Who holds a flock on fd's file, from /proc/locks (pid and command line), or "".
std::string LockHolder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "";
  std::string locks = ReadProc("/proc/locks", 1 << 20);
  char want[64];
  std::snprintf(want, sizeof want, ":%llu ", static_cast<unsigned long long>(st.st_ino));
  for (size_t p = 0, q; p < locks.size(); p = q + 1) {
    q = locks.find('\n', p);
    if (q == std::string::npos) q = locks.size();
    std::string line = locks.substr(p, q - p);
    if (line.find("FLOCK") == std::string::npos || line.find(want) == std::string::npos) continue;
    // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:567 0 EOF": the pid is the fifth field.
    char kind[16], mode[16], rw[16];
    long pid = 0;
    if (std::sscanf(line.c_str(), "%*[^:]: %15s %15s %15s %ld", kind, mode, rw, &pid) != 4 ||
        pid <= 0 || pid == ::getpid())
      continue;
    std::string cmd = ReadProc("/proc/" + std::to_string(pid) + "/cmdline", 4096);
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    return "pid " + std::to_string(pid) + (cmd.empty() ? "" : " (" + cmd + ")");
  }
  return "";
}
}  // namespace

void ReleaseMappedPages(const void* p, uint64_t n) noexcept {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

FileLock::FileLock(int fd, const std::string& path, bool wait, std::string_view what_for,
                   const std::function<void(const std::string& holder)>& on_wait)
    : fd_(fd) {
  int r;
  do {
    r = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  if (r != 0 && errno == EWOULDBLOCK && wait) {
    if (on_wait) {
      std::string holder = LockHolder(fd);
      on_wait(holder.empty() ? "another process" : holder);
    }
    do {
      r = ::flock(fd, LOCK_EX);
      if (r != 0 && errno == EINTR) ThrowIfInterrupted();  // Ctrl-C while waiting
    } while (r != 0 && errno == EINTR);
  }
  if (r != 0) {
    if (errno == EWOULDBLOCK) {
      ENGRAM_THROW(Code::kIo, path << ": another process holds the write lock; " << what_for
                                   << " not started (run again without --no-wait to wait for it)");
    }
    ThrowIo("lock", path, errno);
  }
}

FileLock::~FileLock() { ::flock(fd_, LOCK_UN); }

}  // namespace engram::base

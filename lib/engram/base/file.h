// RAII wrappers for POSIX files: descriptors, read-only/read-write mappings, crash-safe temp files
// and advisory locks. Every failure throws engram::Error with the path and the fix.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace engram::base {

// Owns one file descriptor; closes it on destruction (errors ignored there: call Close() when
// the close of a written file matters).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int Release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes and reports a failed close(2) (which can mean lost writes on NFS) as kIo.
  void Close(const std::string& path_for_errors);

 private:
  int fd_ = -1;
};

// Throws kInvalidArgument when path names a FIFO or socket (checked without opening it, so
// it never blocks). A missing path passes (open reports it).
void RequireNotPipe(const std::string& path);

// Throws kIo, naming the directory and `mkdir -p` it, when the directory a file is to be created
// in does not exist (checked before long work, so a build fails in its first second).
void RequireParentDir(const std::string& path);

// open(2) with a message that names the path and the likely fix. flags as for open(2).
UniqueFd OpenFile(const std::string& path, int flags, mode_t mode = 0644);

// fstat size. Refuses directories and other non-regular files with kInvalidArgument.
uint64_t RegularFileSize(int fd, const std::string& path);

// Reads exactly n bytes at offset; a short read (file ended) throws kCorrupt "truncated".
void PreadFull(int fd, void* buf, size_t n, uint64_t offset, const std::string& path);
// Reads up to n bytes at offset; returns how many were read (fewer only at end of file).
size_t PreadSome(int fd, void* buf, size_t n, uint64_t offset, const std::string& path);

// Calls fn(line_no, line) for each line of a text file (1-based numbers; "\n" and a trailing
// "\r" stripped), reading in bounded chunks: a line longer than max_line bytes is never held in
// memory whole; fn gets it as an empty view with too_long = true. Memory stays O(max_line)
// whatever the file holds. Refuses FIFOs and non-regular files like ReadFileToString.
void ForEachLine(
    const std::string& path, size_t max_line,
    const std::function<void(size_t line_no, std::string_view line, bool too_long)>& fn);
// Writes exactly n bytes at offset (retrying short writes). ENOSPC/EDQUOT say "disk full".
void PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& path);
void Fsync(int fd, const std::string& path);
// fsync of a directory, so that a rename or create inside it is durable.
void FsyncDir(const std::string& dir);
void Truncate(int fd, uint64_t size, const std::string& path);

// Whole small file into memory, refusing files larger than max_bytes (kInvalidArgument).
std::string ReadFileToString(const std::string& path, uint64_t max_bytes);

// Directory part of a path ("." when there is none).
std::string DirName(const std::string& path);
// This process's executable, symlinks resolved (/proc/self/exe); "" when it cannot be read.
std::string ExecutablePath();
bool PathExists(const std::string& path) noexcept;

// A whole-file mapping. Move-only; munmap on destruction. Views into it are valid while the
// MappedFile lives. An empty file maps to an empty span (no mmap call).
class MappedFile {
 public:
  enum class Mode { kReadOnly, kReadWrite };

  MappedFile() = default;
  static MappedFile Open(const std::string& path, Mode mode = Mode::kReadOnly);
  // Maps [0, size) of an already open descriptor.
  static MappedFile FromFd(int fd, uint64_t size, Mode mode, const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const noexcept { return data_; }
  uint8_t* mutable_data() noexcept { return data_; }
  uint64_t size() const noexcept { return size_; }
  std::span<const uint8_t> bytes() const noexcept { return {data_, static_cast<size_t>(size_)}; }
  const std::string& path() const noexcept { return path_; }

  // madvise hints over [offset, offset+len) (clamped to the mapping). Failures are ignored:
  // advice never changes results.
  void AdviseSequential(uint64_t offset, uint64_t len) const noexcept;
  void AdviseRandom(uint64_t offset, uint64_t len) const noexcept;
  void AdviseNormal(uint64_t offset, uint64_t len) const noexcept;
  void AdviseWillNeed(uint64_t offset, uint64_t len) const noexcept;
  // msync of a read-write mapping; throws kIo.
  void Sync();

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// A file written next to its final path and renamed over it by Commit():
//   "<final>.tmp.<pid>" is created with O_EXCL; Commit() fsyncs it, renames it onto the final
//   path and fsyncs the directory. Destruction without Commit() unlinks the temp file.
class TempFile {
 public:
  explicit TempFile(std::string final_path);
  TempFile(TempFile&&) noexcept;
  TempFile& operator=(TempFile&&) = delete;
  TempFile(const TempFile&) = delete;
  ~TempFile();

  int fd() const noexcept { return fd_.get(); }
  const std::string& temp_path() const noexcept { return temp_path_; }
  const std::string& final_path() const noexcept { return final_path_; }
  void Commit();

 private:
  std::string final_path_;
  std::string temp_path_;
  UniqueFd fd_;
  bool committed_ = false;
};

// An input file given on the command line that may be a pipe or a FIFO (`-f <(cmd)`): such a
// stream is read once, front to back, into a temporary regular file (in $TMPDIR, else /tmp),
// removed when this object goes, so that readers that stat, seek or read twice work on it. A
// regular file is used as it is. Throws kInvalidArgument when the stream holds more than
// max_bytes, kIo on read errors.
class SpooledInput {
 public:
  SpooledInput(std::string path, uint64_t max_bytes);
  ~SpooledInput();
  SpooledInput(const SpooledInput&) = delete;
  SpooledInput& operator=(const SpooledInput&) = delete;
  // The path to read: the original one, or the temporary copy.
  const std::string& path() const noexcept { return path_; }
  bool spooled() const noexcept { return !temp_.empty(); }

 private:
  std::string path_, temp_;
};

// Unmaps from this process the whole pages inside [p, p + n) of a shared file mapping. Their
// contents stay in the file and the page cache (dirty pages are written back as usual), so a
// pass through a mapping of a table larger than memory does not keep the whole table as the
// process's resident memory. Never call it on anything but a MAP_SHARED file mapping.
void ReleaseMappedPages(const void* p, uint64_t n) noexcept;

// An advisory exclusive lock (flock) on a file, released on destruction.
class FileLock {
 public:
  // wait=false fails at once with kIo when another process holds the lock.
  // what_for names the operation in the message ("append").
  // on_wait, when the lock is held elsewhere and wait is true, is told who holds it (from
  // /proc/locks: "pid 123 (engramctl sort-buckets t.engram)", or "another process") before this
  // blocks.
  FileLock(int fd, const std::string& path, bool wait, std::string_view what_for,
           const std::function<void(const std::string& holder)>& on_wait = {});
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_;
};

}  // namespace engram::base

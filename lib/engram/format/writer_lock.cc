// WriterLock and stale temp-file cleanup.
#include "engram/format/writer_lock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "engram/base/error.h"

namespace engram::format {

WriterLock::WriterLock(const std::string& path, bool wait, std::string_view what_for,
                       bool read_only, base::Reporter* reporter) {
  auto on_wait = [&](const std::string& holder) {
    if (reporter)
      reporter->Log(base::LogLevel::kNote, path + ": the write lock is held by " + holder + "; " +
                                               std::string(what_for) + " waits for it (--no-wait " +
                                               "fails at once instead)");
  };
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = base::OpenFile(path, read_only ? O_RDONLY : O_RDWR);
    base::RegularFileSize(fd_.get(), path);
    lock_ = std::make_unique<base::FileLock>(fd_.get(), path, wait, what_for, on_wait);
    struct stat a, b;
    if (::fstat(fd_.get(), &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
        a.st_dev == b.st_dev)
      return;
    // A fold renamed a new table over the path while we waited: lock that one instead.
    lock_.reset();
    fd_ = base::UniqueFd();
  }
  ENGRAM_THROW(Code::kIo, path << ": the table keeps being replaced while " << what_for
                               << " waits for its lock");
}

WriterLock::~WriterLock() = default;

void RemoveStaleTempFiles(const std::string& path) {
  std::string dir = base::DirName(path);
  std::string name =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  std::string prefix = name + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string f = e->d_name;
    if (f.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(f.c_str() + prefix.size(), &end, 10);
    if (!end || *end != '\0' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // its writer still runs
    ::unlink((dir + "/" + f).c_str());
  }
  ::closedir(d);
}

}  // namespace engram::format

// The SIGBUS handler behind GuardTableMapping. Everything it does is async-signal-safe: raw
// open/read/close of /proc/self/maps into a stack buffer, mmap, an atomic counter, sigaction.
#include "engram/serve/table_guard.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace engram::serve {

namespace {

std::atomic<uint64_t> g_faults{0};
// Written before the handler is installed (and, later, only between batches while nothing reads
// the table); read by the handler.
char g_path[PATH_MAX + 1];
size_t g_path_len = 0;
uintptr_t g_page = 4096;
bool g_installed = false;

uintptr_t ParseHex(const char*& p, const char* end) {
  uintptr_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9')
      v = v * 16 + static_cast<uintptr_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + static_cast<uintptr_t>(c - 'a' + 10);
    else
      break;
  }
  return v;
}

// One line of /proc/self/maps: "start-end perms offset dev inode   path". True when addr lies in
// [start, end) and the path is the table's (a replaced file shows " (deleted)" after it).
bool LineMapsTable(const char* line, const char* end, uintptr_t addr) {
  const char* p = line;
  const uintptr_t start = ParseHex(p, end);
  if (p >= end || *p != '-') return false;
  ++p;
  const uintptr_t stop = ParseHex(p, end);
  if (addr < start || addr >= stop) return false;
  for (int field = 0; field < 4; ++field) {  // perms, offset, dev, inode
    while (p < end && *p == ' ') ++p;
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  const size_t len = static_cast<size_t>(end - p);
  if (len < g_path_len || std::memcmp(p, g_path, g_path_len) != 0) return false;
  return len == g_path_len || std::memcmp(p + g_path_len, " (deleted)", 10) == 0;
}

bool AddressMapsTable(uintptr_t addr) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  size_t have = 0;
  bool found = false, eof = false;
  while (!found && !eof) {
    const ssize_t n = ::read(fd, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) eof = true;
    if (n > 0) have += static_cast<size_t>(n);
    size_t line = 0;
    for (size_t i = 0; i < have; ++i) {
      if (buf[i] != '\n') continue;
      if (LineMapsTable(buf + line, buf + i, addr)) {
        found = true;
        break;
      }
      line = i + 1;
    }
    if (eof && !found && line < have) found = LineMapsTable(buf + line, buf + have, addr);
    if (line == 0 && have == sizeof buf) break;  // a line longer than the buffer: give up
    std::memmove(buf, buf + line, have - line);
    have -= line;
  }
  ::close(fd);
  return found;
}

void OnSigbus(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code == BUS_ADRERR && g_path_len > 0 && AddressMapsTable(addr)) {
    // The page now reads as zeros: the faulting load completes, the batch's result is thrown
    // away by the scheduler (TableFaults() moved).
    void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
    if (::mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      g_faults.fetch_add(1, std::memory_order_relaxed);
      errno = saved_errno;
      return;
    }
  }
  // Not the table's: the default action, on return, when the access faults again.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
}

}  // namespace

uint64_t TableFaults() { return g_faults.load(std::memory_order_relaxed); }

void GuardTableMapping(const std::string& path) {
  char resolved[PATH_MAX];
  if (path.empty() || ::realpath(path.c_str(), resolved) == nullptr) return;
  g_path_len = 0;
  std::strncpy(g_path, resolved, PATH_MAX);
  g_path[PATH_MAX] = '\0';
  g_path_len = std::strlen(g_path);
  if (g_installed) return;
  g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  g_installed = ::sigaction(SIGBUS, &sa, nullptr) == 0;
}

}  // namespace engram::serve

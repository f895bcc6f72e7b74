// getrusage / procfs readers behind the closing resource line of long commands.
#include "engram/base/resource.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "engram/base/units.h"

namespace engram::base {

ResourceUsage CurrentResourceUsage() {
  ResourceUsage u;
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) {
    u.cpu_user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
    u.cpu_system_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
    u.peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
  }
  return u;
}

uint64_t UnixNow() {
  if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e && *e) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(e, &end, 10);
    if (end && *end == '\0') return v;
  }
  return static_cast<uint64_t>(std::time(nullptr));
}

namespace {

// A "Key:   123 kB" line of /proc/self/status, in bytes; 0 when absent.
uint64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0 && line.size() > key.size() && line[key.size()] == ':') {
      std::istringstream is(line.substr(key.size() + 1));
      uint64_t kib = 0;
      is >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

}  // namespace

uint64_t CurrentRssBytes() { return StatusBytes("VmRSS"); }

uint64_t AddressSpaceLimitBytes() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<uint64_t>(rl.rlim_cur);
}

uint64_t CurrentVirtualBytes() { return StatusBytes("VmSize"); }

std::string MemoryLimitHint() {
  const uint64_t limit = AddressSpaceLimitBytes();
  if (limit == 0) return "; free memory or run on a larger host";
  return "; the address-space limit (ulimit -v) is " + FormatBytes(limit) + ", of which " +
         FormatBytes(CurrentVirtualBytes()) + " is in use: raise it (ulimit -v unlimited)";
}

std::string FormatResourceLine(double wall_seconds, const ResourceUsage& usage) {
  double cpu = usage.cpu_user_s + usage.cpu_system_s;
  char buf[160];
  std::snprintf(buf, sizeof buf, "resources: wall %s, cpu %s (%.2f cores), peak RSS %s",
                FormatSeconds(wall_seconds).c_str(), FormatSeconds(cpu).c_str(),
                wall_seconds > 0 ? cpu / wall_seconds : 0.0,
                FormatBytes(usage.peak_rss_bytes).c_str());
  return buf;
}

}  // namespace engram::base

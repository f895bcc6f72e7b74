// Wall clock, CPU time and peak RSS of the current process, for closing resource lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace engram::base {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void Reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

struct ResourceUsage {
  double cpu_user_s = 0;
  double cpu_system_s = 0;
  uint64_t peak_rss_bytes = 0;
};

ResourceUsage CurrentResourceUsage();
// Seconds since the epoch, or SOURCE_DATE_EPOCH when that is set (reproducible outputs).
uint64_t UnixNow();

// Current resident set size (VmRSS), 0 when unknown.
uint64_t CurrentRssBytes();

// The address-space limit in force (RLIMIT_AS, ulimit -v), 0 when unlimited.
uint64_t AddressSpaceLimitBytes();
// The process's mapped address space (VmSize), 0 when unknown.
uint64_t CurrentVirtualBytes();
// For messages about a failed allocation or mapping: "; the address-space limit (ulimit -v) is
// 1.0 GiB, of which 0.9 GiB is in use: raise it ..." when one is set, else "; free memory ...".
std::string MemoryLimitHint();

// "resources: wall 12.4s, cpu 23.1s (1.86 cores), peak RSS 1.2 GiB"
std::string FormatResourceLine(double wall_seconds, const ResourceUsage& usage);

}  // namespace engram::base

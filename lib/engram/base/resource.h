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

// "resources: wall 12.4s, cpu 23.1s (1.86 cores), peak RSS 1.2 GiB"
std::string FormatResourceLine(double wall_seconds, const ResourceUsage& usage);

}  // namespace engram::base

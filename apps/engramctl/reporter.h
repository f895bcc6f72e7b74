// engramctl's Reporter: log lines on stderr (quiet with -q), progress redrawn in place on a TTY
// or, in a batch job's log, one plain line a minute (ENGRAM_PROGRESS_INTERVAL seconds).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "engram/base/reporter.h"

namespace engramctl {

// Writes log lines and TTY progress (with rate and ETA) to stderr. Thread-safe.
class StderrReporter : public engram::base::Reporter {
 public:
  StderrReporter();
  void Log(engram::base::LogLevel level, std::string_view line) override;
  void Progress(std::string_view phase, uint64_t done, uint64_t total,
                std::string_view unit) override;
  void ProgressDone(std::string_view phase) override;

 private:
  void ClearLine();
  std::mutex mu_;
  bool tty_;
  bool line_dirty_ = false;
  // Running phases: when and at what count each first reported.
  std::map<std::string, std::pair<double, uint64_t>, std::less<>> phase_start_;
  double last_draw_ = 0;     // 0: nothing drawn yet
  double log_interval_ = 0;  // seconds between lines when stderr is not a TTY
};

// Passes on warnings and progress only: for commands whose report is their own (verify, quantize's
// check), not the model loader's "[engram] ..." lines (those are run's and serve's).
class WarningsOnly final : public engram::base::Reporter {
 public:
  explicit WarningsOnly(engram::base::Reporter& to) : to_(to) {}
  void Log(engram::base::LogLevel level, std::string_view line) override {
    if (level >= engram::base::LogLevel::kWarning) to_.Log(level, line);
  }
  void Progress(std::string_view phase, uint64_t done, uint64_t total,
                std::string_view unit) override {
    to_.Progress(phase, done, total, unit);
  }
  void ProgressDone(std::string_view phase) override { to_.ProgressDone(phase); }

 private:
  engram::base::Reporter& to_;
};

}  // namespace engramctl

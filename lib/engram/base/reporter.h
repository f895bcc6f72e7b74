// The sink through which library code reports progress and diagnostics. Library code never
// prints: apps/ supplies a Reporter that writes to stderr (or nothing, for tests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace engram::base {

enum class LogLevel : uint8_t { kDebug, kInfo, kNote, kWarning };

class Reporter {
 public:
  virtual ~Reporter() = default;
  // One finished line of text (no trailing newline), e.g. "[engram] hash buckets: 2097152".
  virtual void Log(LogLevel level, std::string_view line) = 0;
  // Progress of a long phase. total == 0 means unknown. Called often; implementations throttle.
  // unit names what done/total count ("tokens", "bytes", "rows"). Thread-safe implementations
  // are required only where a caller says it reports from several threads.
  virtual void Progress(std::string_view phase, uint64_t done, uint64_t total,
                        std::string_view unit) {
    (void)phase, (void)done, (void)total, (void)unit;
  }
  // Marks the end of a phase whose Progress was shown.
  virtual void ProgressDone(std::string_view phase) { (void)phase; }
};

// Discards everything (tests, library callers that want silence).
class NullReporter final : public Reporter {
 public:
  void Log(LogLevel, std::string_view) override {}
};

// Returns a process-wide NullReporter.
Reporter& Silent();

}  // namespace engram::base

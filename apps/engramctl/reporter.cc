// StderrReporter: rate and ETA per phase, drawing throttled across phases.
#include "reporter.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli_common.h"
#include "engram/base/units.h"

namespace engramctl {

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::string Rate(double per_s, std::string_view unit) {
  char buf[64];
  if (unit == "bytes") return engram::base::FormatBytes(static_cast<uint64_t>(per_s)) + "/s";
  if (per_s >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM %.*s/s", per_s / 1e6, static_cast<int>(unit.size()),
                  unit.data());
  else if (per_s >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk %.*s/s", per_s / 1e3, static_cast<int>(unit.size()),
                  unit.data());
  else if (per_s >= 10)
    std::snprintf(buf, sizeof buf, "%.0f %.*s/s", per_s, static_cast<int>(unit.size()),
                  unit.data());
  else  // a slow rate (a fit's steps) keeps two significant digits rather than reading "0"
    std::snprintf(buf, sizeof buf, "%.2g %.*s/s", per_s, static_cast<int>(unit.size()),
                  unit.data());
  return buf;
}
}  // namespace

// Seconds between progress lines when stderr is not a terminal (ENGRAM_PROGRESS_INTERVAL).
constexpr double kLogProgressSeconds = 60;

StderrReporter::StderrReporter() : tty_(::isatty(STDERR_FILENO) == 1) {
  log_interval_ = kLogProgressSeconds;
  if (const char* v = std::getenv("ENGRAM_PROGRESS_INTERVAL")) {
    char* end = nullptr;
    double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s >= 0 && std::isfinite(s))
      log_interval_ = s;
    else
      std::fprintf(stderr,
                   "note: ENGRAM_PROGRESS_INTERVAL=%s is not a number of seconds; using %.0f\n", v,
                   kLogProgressSeconds);
  }
}

void StderrReporter::ClearLine() {
  if (line_dirty_) {
    std::fputs("\r\033[K", stderr);
    line_dirty_ = false;
  }
}

void StderrReporter::Log(engram::base::LogLevel level, std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Globals().quiet && level < engram::base::LogLevel::kWarning) return;
  ClearLine();
  // What went to stdout so far comes first, so a log of both streams (2>&1) keeps their order.
  std::fflush(stdout);
  const char* prefix = "";
  if (level == engram::base::LogLevel::kNote) prefix = "note: ";
  if (level == engram::base::LogLevel::kWarning) prefix = "warning: ";
  std::fprintf(stderr, "%s%.*s\n", prefix, static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

void StderrReporter::Progress(std::string_view phase, uint64_t done, uint64_t total,
                              std::string_view unit) {
  if (Globals().quiet || Globals().no_progress) return;
  std::lock_guard<std::mutex> lock(mu_);
  double now = Now();
  // Phases may interleave (reading tokens while counting them): each keeps its own start, so
  // its rate and ETA stay true, while drawing is throttled across all of them.
  auto it = phase_start_.find(phase);
  if (it == phase_start_.end())
    it = phase_start_.emplace(std::string(phase), std::make_pair(now, done)).first;
  if (last_draw_ == 0) last_draw_ = tty_ ? 0.0 : now;
  // A TTY line is redrawn in place; a log (batch jobs, pipes) gets one plain line a minute.
  if (now - last_draw_ < (tty_ ? 0.1 : log_interval_)) return;
  last_draw_ = now;
  // The rate counts from the phase's first report (work before it took unknown time).
  const double elapsed = now - it->second.first;
  const uint64_t since = done - std::min(done, it->second.second);
  const double rate = elapsed > 0 ? static_cast<double>(since) / elapsed : 0;
  char buf[256];
  int len = total > 0
                ? std::snprintf(buf, sizeof buf, "%.*s: %5.1f%%", static_cast<int>(phase.size()),
                                phase.data(),
                                100.0 * static_cast<double>(done) / static_cast<double>(total))
                : std::snprintf(buf, sizeof buf, "%.*s: %llu %.*s", static_cast<int>(phase.size()),
                                phase.data(), static_cast<unsigned long long>(done),
                                static_cast<int>(unit.size()), unit.data());
  // Until a rate is known the line has no rate and no ETA.
  if (rate > 0 && len > 0 && static_cast<size_t>(len) < sizeof buf) {
    std::string tail = "  " + Rate(rate, unit);
    if (total > 0)
      tail += "  ETA " + engram::base::FormatSeconds(
                             static_cast<double>(total - std::min(done, total)) / rate);
    std::snprintf(buf + len, sizeof buf - static_cast<size_t>(len), "%s", tail.c_str());
  }
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", buf);
    line_dirty_ = true;
  } else {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", buf);
  }
  std::fflush(stderr);
}

void StderrReporter::ProgressDone(std::string_view phase) {
  std::lock_guard<std::mutex> lock(mu_);
  ClearLine();
  phase_start_.erase(std::string(phase));
  std::fflush(stderr);
}

}  // namespace engramctl

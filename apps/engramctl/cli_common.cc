// Exit-code mapping, stderr reporter and config helpers for engramctl.
#include "cli_common.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "engram/base/file.h"
#include "engram/base/units.h"

namespace engramctl {

using engram::Code;

int ExitCodeFor(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
    case Code::kConfig:
      return kExitUsage;
    case Code::kVersion:
      return kExitVersion;
    default:
      return kExitRuntime;
  }
}

GlobalFlags& Globals() {
  static GlobalFlags g;
  return g;
}

int& CommandExit() {
  static int code = kExitOk;
  return code;
}

std::string& CommandLine() {
  static std::string s;
  return s;
}

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
  else
    std::snprintf(buf, sizeof buf, "%.0f %.*s/s", per_s, static_cast<int>(unit.size()),
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

std::optional<engram::config::Config> LoadConfigIfAny(const std::string& path,
                                                      engram::base::Reporter& r, bool show_notes) {
  if (path.empty()) return std::nullopt;
  engram::config::Config c = engram::config::Load(path);
  std::stable_sort(c.notes.begin(), c.notes.end(),
                   [](const auto& a, const auto& b) { return a.line < b.line; });
  if (show_notes || Globals().verbose)
    for (const auto& n : c.notes)
      r.Log(engram::base::LogLevel::kNote,
            path + ":" + std::to_string(n.line) + ": " + n.key + ": " + n.text);
  if (c.table_path_from_env)
    r.Log(engram::base::LogLevel::kNote,
          "ENGRAM_TABLE_PATH overrides [engram.table] path: " + c.table.path);
  return c;
}

std::string TokenizerFromConfig(const engram::config::Config& c) {
  if (!c.model.tokenizer.empty()) return c.model.tokenizer;
  if (!c.model.path.empty()) return c.model.path + "/tokenizer.json";
  return {};
}

void PrintStdout(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  if (s.empty() || s.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::vector<uint64_t> ParseUintList(const std::string& s, const char* flag) {
  std::vector<uint64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    unsigned long long x = 0;
    try {
      x = std::stoull(item, &used);
    } catch (...) {
      used = 0;
    }
    ENGRAM_CHECK(used == item.size() && !item.empty() && item[0] != '-',
                 engram::Code::kInvalidArgument,
                 flag << " '" << s << "': write comma-separated non-negative integers, e.g. 1,15");
    v.push_back(x);
  }
  ENGRAM_CHECK(!v.empty(), engram::Code::kInvalidArgument, flag << " is empty");
  return v;
}

void AddLayoutFlags(CLI::App* s, LayoutFlags* f) {
  s->add_option("--layout", f->preset, "Layout preset: engram-demo | deepseek-v4.1");
  s->add_option("--tokenizer", f->tokenizer, "HF tokenizer.json (canonical-id map; text input)");
  f->o_addr = s->add_option("--addressing", f->addressing,
                            "native (XXH3, power-of-two buckets) | deepseek (mod prime)");
  f->o_seed =
      s->add_option("--hash-seed", f->hash_seed, "Table seed of the addressing (default 0)");
  f->o_layers = s->add_option("--layers", f->layers, "Engram layer ids, e.g. 1,15");
  f->o_order = s->add_option("--order", f->order, "Max n-gram order N (orders 2..N)");
  f->o_heads = s->add_option("--heads", f->heads, "Hash heads per order");
  f->o_buckets = s->add_option("--buckets", f->buckets,
                               "Buckets per sub-table (native: power of two, e.g. 1M)");
  f->o_base = s->add_option("--base-sizes", f->base_sizes,
                            "deepseek: prime search base per order, e.g. 646400,646400");
  f->o_row_dim = s->add_option("--row-dim", f->row_dim, "Values per row (embed_dim / n_heads)");
  f->o_dtype = s->add_option("--dtype", f->dtype, "Row storage: f32 | bf16 | f16 | fp8-e4m3");
  f->o_pad = s->add_option("--pad-id", f->pad_id,
                           "Tokenizer id of the pad token (its canonical id pads history)");
  f->o_vocab = s->add_option("--vocab-size", f->vocab,
                             "Canonical vocabulary size when there is no tokenizer");
}

void ApplyLayoutFlags(const LayoutFlags& f, engram::format::LayoutRequest* r) {
  if (!f.preset.empty()) r->preset = f.preset;
  if (!f.tokenizer.empty()) r->tokenizer_path = f.tokenizer;
  if (f.o_addr->count()) r->addressing = f.addressing;
  if (f.o_seed->count()) r->seed = f.hash_seed;
  if (f.o_layers->count()) {
    std::vector<uint32_t> ids;
    for (uint64_t v : ParseUintList(f.layers, "--layers")) ids.push_back(static_cast<uint32_t>(v));
    r->layer_ids = ids;
  }
  if (f.o_order->count()) r->max_order = f.order;
  if (f.o_heads->count()) r->n_heads = f.heads;
  if (f.o_buckets->count()) r->buckets = engram::base::ParseSize(f.buckets, "--buckets");
  if (f.o_base->count()) r->base_sizes = ParseUintList(f.base_sizes, "--base-sizes");
  if (f.o_row_dim->count()) r->row_dim = f.row_dim;
  if (f.o_pad->count()) r->pad_token = f.pad_id;
  if (f.o_vocab->count()) r->vocab_size = f.vocab;
  if (f.o_dtype->count()) {
    auto dt = engram::base::ParseDType(f.dtype);
    ENGRAM_CHECK(dt.has_value(), engram::Code::kInvalidArgument,
                 "--dtype " << f.dtype << ": use f32, bf16, f16 or fp8-e4m3");
    r->dtype = *dt;
  }
}

}  // namespace engramctl

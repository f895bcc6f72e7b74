// Exit codes, global flags, config loading and printing for engramctl.
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

void AddTableFlags(CLI::App* s, std::string* table, std::string* config_path) {
  s->add_option("table", *table, "Table file (default: [engram.table] path of --config)");
  s->add_option("--config", *config_path, "config.toml naming the table ([engram.table] path)");
}

void ResolveTable(std::string* table, const std::string& config_path, engram::base::Reporter& r) {
  if (table->empty())
    if (auto cfg = LoadConfigIfAny(config_path, r)) *table = cfg->table.path;
  ENGRAM_CHECK(!table->empty(), engram::Code::kInvalidArgument,
               "no table given; name one or use --config");
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

}  // namespace engramctl

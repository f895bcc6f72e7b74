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
#include "engram/tokenizer/tokenizer.h"

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

// Documents of canonical ids: a u32 token file (0xFFFFFFFF between documents) or text, one
// document per line.
std::vector<std::vector<uint32_t>> ReadDocuments(const std::string& tokens,
                                                 const std::string& corpus,
                                                 const engram::format::Layout& l,
                                                 const std::string& tokenizer_path,
                                                 uint64_t max_tokens) {
  std::vector<std::vector<uint32_t>> docs(1);
  uint64_t n = 0;
  if (!tokens.empty()) {
    const std::string bytes = engram::base::ReadFileToString(tokens, 16ull << 30);
    ENGRAM_CHECK(bytes.size() % 4 == 0, engram::Code::kInvalidArgument,
                 tokens << ": " << bytes.size() << " bytes, not a whole number of u32 ids");
    for (size_t i = 0; i + 4 <= bytes.size() && n < max_tokens; i += 4) {
      uint32_t id;
      std::memcpy(&id, bytes.data() + i, 4);
      if (id == 0xFFFFFFFFu) {
        if (!docs.back().empty()) docs.emplace_back();
        continue;
      }
      ENGRAM_CHECK(id < l.spec.canonical_vocab, engram::Code::kInvalidArgument,
                   tokens << ": id " << id << " at position " << i / 4
                          << " is outside the canonical vocabulary of " << l.spec.canonical_vocab
                          << " ids");
      docs.back().push_back(id);
      ++n;
    }
    return docs;
  }
  ENGRAM_CHECK(!tokenizer_path.empty(), engram::Code::kInvalidArgument,
               "--corpus is text: name its tokenizer (--tokenizer, or --config with a model)");
  auto tok = engram::tokenizer::Tokenizer::Load(tokenizer_path);
  engram::base::ForEachLine(corpus, 64u << 20, [&](size_t, std::string_view line, bool too_long) {
    ENGRAM_CHECK(!too_long, engram::Code::kInvalidArgument,
                 corpus << ": a line longer than 64 MiB; one document per line");
    if (n >= max_tokens) return;
    std::vector<uint32_t> ids = tok->Encode(line);
    if (ids.empty()) return;
    std::vector<uint32_t> doc;
    for (uint32_t id : ids) {
      uint32_t c;
      ENGRAM_CHECK(l.Canonical(id, &c), engram::Code::kInvalidArgument,
                   "token id " << id << " of " << corpus
                               << " is outside the table's canonical map; is it the table's "
                                  "tokenizer?");
      doc.push_back(c);
    }
    n += doc.size();
    docs.push_back(std::move(doc));
  });
  return docs;
}

}  // namespace engramctl

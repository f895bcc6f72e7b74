// Shared CLI plumbing: exit codes, the stderr Reporter, config loading and small printers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/reporter.h"
#include "engram/config/config.h"
#include "engram/format/resolve.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace engramctl {

// schemas/cli.md "Exit status".
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitProblems = 3;
inline constexpr int kExitVersion = 4;

int ExitCodeFor(engram::Code code);

// Global flags every subcommand sees.
struct GlobalFlags {
  bool quiet = false;
  bool no_progress = false;
  bool verbose = false;  // -v: also the config notes every command would otherwise keep quiet
};
GlobalFlags& Globals();

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

// A subcommand's exit status, set by its callback (main returns it).
int& CommandExit();

// Loads --config when given; nullopt when path is empty. Notes about keys that mean nothing to
// engramctl go to the reporter only with show_notes (verify --config) or -v, not on every command.
std::optional<engram::config::Config> LoadConfigIfAny(const std::string& path,
                                                      engram::base::Reporter& r,
                                                      bool show_notes = false);
// The tokenizer a config names: [model] tokenizer, else <[model] path>/tokenizer.json, else "".
std::string TokenizerFromConfig(const engram::config::Config& c);

// Writes s (plus a newline) to stdout.
void PrintStdout(const std::string& s);
// argv joined for provenance.
std::string& CommandLine();

// Layout flags shared by commands that can describe a layout without a table.
struct LayoutFlags {
  std::string preset, addressing, layers, buckets, base_sizes, dtype, tokenizer;
  uint64_t hash_seed = 0;
  uint32_t order = 0, heads = 0, row_dim = 0, pad_id = 0, vocab = 0;
  CLI::Option *o_addr = nullptr, *o_seed = nullptr, *o_layers = nullptr, *o_order = nullptr,
              *o_heads = nullptr, *o_buckets = nullptr, *o_base = nullptr, *o_row_dim = nullptr,
              *o_dtype = nullptr, *o_pad = nullptr, *o_vocab = nullptr;
};
void AddLayoutFlags(CLI::App* app, LayoutFlags* f);
// Applies the flags that were given on top of what `r` already holds (config, preset).
void ApplyLayoutFlags(const LayoutFlags& f, engram::format::LayoutRequest* r);
// Comma-separated unsigned integers ("1,15").
std::vector<uint64_t> ParseUintList(const std::string& s, const char* flag);

// Subcommand registration (one per cmd_<verb>.cc).
void AddBuildCommand(CLI::App& app);
void AddMergeCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddVerifyCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddLookupCommand(CLI::App& app);
void AddAppendCommand(CLI::App& app);
void AddSortBucketsCommand(CLI::App& app);
void AddPrefetchCommand(CLI::App& app);
void AddRunCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);
void AddCompletionCommand(CLI::App& app);

// `engramctl --version`: version, commit and the optional parts compiled in.
std::string VersionText();

}  // namespace engramctl

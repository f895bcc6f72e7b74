// Shared CLI plumbing: exit codes, global flags, config loading, small printers, and the
// commands' registration (one Add<Verb>Command per cmd_<verb>.cc).
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
#include "flags.h"
#include "reporter.h"

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

// A subcommand's exit status, set by its callback (main returns it).
int& CommandExit();

// Loads --config when given; nullopt when path is empty. Notes about keys that mean nothing to
// engramctl go to the reporter only with show_notes (verify --config) or -v, not on every command.
std::optional<engram::config::Config> LoadConfigIfAny(const std::string& path,
                                                      engram::base::Reporter& r,
                                                      bool show_notes = false);
// Adds the positional TABLE (optional) and --config to a command that reads one table; call
// ResolveTable in its callback.
void AddTableFlags(CLI::App* app, std::string* table, std::string* config_path);
// The table a command works on: TABLE when given, else [engram.table] path of --config (and
// ENGRAM_TABLE_PATH over it); kInvalidArgument when neither names one.
void ResolveTable(std::string* table, const std::string& config_path, engram::base::Reporter& r);

// The tokenizer a config names: [model] tokenizer, else <[model] path>/tokenizer.json, else "".
std::string TokenizerFromConfig(const engram::config::Config& c);

// Documents of canonical ids for a table's layout: a u32 token file `tokens` (0xFFFFFFFF between
// documents) or the text file `corpus`, one document per line, read with the tokenizer at
// tokenizer_path; at most max_tokens ids.
std::vector<std::vector<uint32_t>> ReadDocuments(const std::string& tokens,
                                                 const std::string& corpus,
                                                 const engram::format::Layout& l,
                                                 const std::string& tokenizer_path,
                                                 uint64_t max_tokens);

// Writes s (plus a newline) to stdout.
void PrintStdout(const std::string& s);
// argv joined for provenance.
std::string& CommandLine();

// Subcommand registration (one per cmd_<verb>.cc).
void AddBuildCommand(CLI::App& app);
void AddMergeCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddVerifyCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddLookupCommand(CLI::App& app);
void AddAppendCommand(CLI::App& app);
void AddFactsCommand(CLI::App& app);
void AddSortBucketsCommand(CLI::App& app);
void AddPrefetchCommand(CLI::App& app);
void AddHotsetCommand(CLI::App& app);
void AddQuantizeCommand(CLI::App& app);
void AddRunCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);
void AddCompletionCommand(CLI::App& app);

// `engramctl --version`: version, commit and the optional parts compiled in.
std::string VersionText();

}  // namespace engramctl

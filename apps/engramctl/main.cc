// engramctl: one CLI over libengram. Parses argv with CLI11, runs one subcommand, and maps any
// engram::Error to "engramctl <verb>: <message>" and an exit status (schemas/cli.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_common.h"
#include "engram/base/resource.h"
#include "engram/base/text.h"

namespace {

// Every command's numbers are checked the same way (issue 32): a floating-point option must be a
// finite number (nan, inf and 1e999 are refused, exit 2), and -t/--threads at most 8 x the
// hardware's threads (a larger pool only thrashes, and 100000 overflowed the OpenMP runtime).
void CheckNumbers(CLI::App* app) {
  static const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  for (CLI::Option* o : app->get_options()) {
    if (o->get_type_name().rfind("FLOAT", 0) == 0)
      o->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0') return "";  // the option's own parse reports it
            return std::isfinite(x) ? "" : "must be a finite number, not " + v;
          },
          "", ""));
    if (o->get_name() == "--threads")
      o->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const long long x = std::strtoll(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0') return "";
            if (x < 0) return "must be 0 (all cores) or more";
            if (x > 8ll * hw)
              return "is " + v + ", more than 8 x this machine's " + std::to_string(hw) +
                     " hardware threads; give at most " + std::to_string(8 * hw) +
                     " (0 = all cores)";
            return "";
          },
          "", ""));
  }
  for (CLI::App* sub : app->get_subcommands({})) CheckNumbers(sub);
}

// The command word: the first argument that is not one of the global flags. "" when none.
std::string FindVerb(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a[0] != '-') return a;
  }
  return "";
}

bool WantsHelpOrVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help" || a == "--version") return true;
  }
  return false;
}

// CLI11's usage errors, in the `engramctl <verb>: ...` form with the flag's name. Extra
// arguments are never echoed (they are often a prompt).
int UsageError(const CLI::ParseError& e, CLI::App& app) {
  CLI::App* where = &app;
  for (CLI::App* sub : app.get_subcommands()) where = sub;
  std::string name = where == &app ? std::string() : " " + where->get_name();
  std::string msg = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    std::vector<std::string> flags;
    size_t words = 0;
    for (const std::string& x : app.remaining(true)) {
      if (x.size() > 1 && x[0] == '-')
        flags.push_back(x);
      else
        ++words;
    }
    msg.clear();
    if (!flags.empty()) {
      msg = std::string("unknown option") + (flags.size() > 1 ? "s" : "");
      for (size_t i = 0; i < flags.size(); ++i) msg += (i ? ", " : " ") + flags[i];
    }
    if (words)
      msg += (msg.empty() ? "" : "; ") + std::to_string(words) + " unexpected argument" +
             (words > 1 ? "s" : "") +
             " (quote a prompt with spaces as one argument, or give it with -p)";
  }
  std::fprintf(stderr, "engramctl%s: %s\nsee 'engramctl%s --help'\n", name.c_str(), msg.c_str(),
               name.c_str());
  return engramctl::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace engramctl;
  CLI::App app{"engramctl: build, check, extend and serve Engram n-gram memory tables",
               "engramctl"};
  app.set_version_flag("--version", VersionText());
  app.require_subcommand(1);
  app.add_flag("-q,--quiet", Globals().quiet, "Print only warnings and errors on stderr");
  app.add_flag("--no-progress", Globals().no_progress, "Never draw progress lines");
  app.add_flag("-v,--verbose", Globals().verbose,
               "Also print the config notes (keys engramctl accepts but does not use) that only "
               "'verify --config' prints by default");
  app.fallthrough();
  // Only the command being run is built when it is named and no help is asked for: each
  // command's options cost heap pages, and page faults are most of a short command's time (a
  // warm `prefetch` or `verify` of a small table). Help, completion and a mistyped command see
  // them all.
  static const std::pair<const char*, void (*)(CLI::App&)> kCommands[] = {
      {"build", AddBuildCommand},
      {"merge", AddMergeCommand},
      {"inspect", AddInspectCommand},
      {"verify", AddVerifyCommand},
      {"tokenize", AddTokenizeCommand},
      {"lookup", AddLookupCommand},
      {"append", AddAppendCommand},
      {"facts", AddFactsCommand},
      {"sort-buckets", AddSortBucketsCommand},
      {"prefetch", AddPrefetchCommand},
      {"hotset", AddHotsetCommand},
      {"quantize", AddQuantizeCommand},
      {"run", AddRunCommand},
      {"serve", AddServeCommand},
      {"export", AddExportCommand},
      {"completion", AddCompletionCommand},
  };
  std::string verb = FindVerb(argc, argv);
  const bool help = WantsHelpOrVersion(argc, argv);
  bool one = false;
  if (!help && verb != "completion")
    for (const auto& [name, add] : kCommands)
      if (verb == name) {
        add(app);
        one = true;
      }
  if (!one)
    for (const auto& c : kCommands) c.second(app);
  // Recorded in table provenance; argv[0] as the program name keeps outputs reproducible.
  CommandLine() = "engramctl";
  for (int i = 1; i < argc; ++i) CommandLine() += " " + std::string(argv[i]);

  if (!help || !verb.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), verb) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      if (verb.empty()) {
        std::fprintf(stderr, "engramctl: give a command: %s\nsee 'engramctl --help'\n",
                     list.c_str());
      } else {
        std::string nearest = names.front();
        for (const auto& n : names)
          if (engram::base::EditDistance(verb, n) < engram::base::EditDistance(verb, nearest))
            nearest = n;
        std::fprintf(stderr, "engramctl: unknown command '%s'%s\ncommands: %s\n", verb.c_str(),
                     engram::base::EditDistance(verb, nearest) <= 3
                         ? (" (did you mean '" + nearest + "'?)").c_str()
                         : "",
                     list.c_str());
      }
      return kExitUsage;
    }
  }
  CheckNumbers(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return UsageError(e, app);
  } catch (const engram::Error& e) {
    for (auto* sub : app.get_subcommands()) verb = sub->get_name();
    std::fprintf(stderr, "engramctl %s: %s\n", verb.c_str(), e.what());
    return ExitCodeFor(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(
        stderr,
        "engramctl %s: out of memory (an allocation failed); lower --memory or --threads%s\n",
        verb.c_str(), engram::base::MemoryLimitHint().c_str());
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engramctl %s: internal error: %s\n", verb.c_str(), e.what());
    return kExitRuntime;
  }
  return CommandExit();
}

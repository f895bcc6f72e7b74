// engramctl: one CLI over libengram. Parses argv with CLI11, runs one subcommand, and maps any
// engram::Error to "engramctl <verb>: <message>" and an exit status (schemas/cli.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <string>

#include "cli_common.h"

int main(int argc, char** argv) {
  using namespace engramctl;
  CLI::App app{"engramctl: build, check, extend and serve Engram n-gram memory tables",
               "engramctl"};
  app.set_version_flag("--version", "engramctl 0.1.0");
  app.require_subcommand(1);
  app.add_flag("-q,--quiet", Globals().quiet, "Print only warnings and errors on stderr");
  app.add_flag("--no-progress", Globals().no_progress, "Never draw progress lines");
  app.fallthrough();
  AddBuildCommand(app);
  AddMergeCommand(app);
  AddInspectCommand(app);
  AddVerifyCommand(app);
  AddTokenizeCommand(app);
  AddLookupCommand(app);
  AddAppendCommand(app);
  AddSortBucketsCommand(app);
  AddPrefetchCommand(app);
  AddRunCommand(app);
  AddServeCommand(app);
  AddExportCommand(app);
  // Recorded in table provenance; argv[0] as the program name keeps outputs reproducible.
  CommandLine() = "engramctl";
  for (int i = 1; i < argc; ++i) CommandLine() += " " + std::string(argv[i]);

  std::string verb = argc > 1 ? argv[1] : "";
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  } catch (const engram::Error& e) {
    for (auto* sub : app.get_subcommands()) verb = sub->get_name();
    std::fprintf(stderr, "engramctl %s: %s\n", verb.c_str(), e.what());
    return ExitCodeFor(e.code());
  } catch (const std::bad_alloc&) {
    std::fprintf(
        stderr,
        "engramctl %s: out of memory; lower --memory or --threads, or use a larger machine\n",
        verb.c_str());
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engramctl %s: internal error: %s\n", verb.c_str(), e.what());
    return kExitRuntime;
  }
  return CommandExit();
}

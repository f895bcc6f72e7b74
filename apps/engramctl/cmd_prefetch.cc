// `engramctl prefetch`: warm, report, pin or evict a table's pages in the host page cache.
#include <fcntl.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/units.h"
#include "engram/format/reader.h"
#include "engram/table/hotset.h"
#include "engram/table/prefetch.h"

namespace engramctl {

void AddPrefetchCommand(CLI::App& app) {
  struct Flags {
    std::string table, config_path;
    bool status = false, lock = false, evict = false, json = false;
    int threads = 0;
    std::string budget, hot;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "prefetch", "Make a table resident in host memory (page cache) before serving");
  AddTableFlags(s, &f->table, &f->config_path);
  s->add_flag("--status", f->status, "Only report residency (mincore), per section");
  s->add_flag("--lock", f->lock,
              "Warm, then pin the table in memory (mlock) until interrupted, like vmtouch -l");
  s->add_flag("--evict", f->evict, "Drop the table from the page cache");
  s->add_option("--budget", f->budget,
                "Warm at most SIZE (e.g. 4G), hottest first: metadata, owner tags and scales, "
                "then the row pages the build corpus's lookups hit most (STATS); with --lock, pin "
                "only those");
  s->add_option("--hot", f->hot,
                "Rank row pages by this trace's reads instead of STATS: canonical ids, u32, "
                "0xFFFFFFFF between requests ('serve --trace', or hotset's --tokens input); "
                "without --budget, warms every page it reads");
  s->add_option("-t,--threads", f->threads, "Parallel readers (default: all cores, at least 2)");
  s->add_flag("--json", f->json, "Print JSON");
  s->callback([f] {
    StderrReporter rep;
    ResolveTable(&f->table, f->config_path, rep);
    ENGRAM_CHECK(f->status + f->lock + f->evict <= 1, engram::Code::kInvalidArgument,
                 "--status, --lock and --evict exclude each other");
    ENGRAM_CHECK((f->budget.empty() && f->hot.empty()) || (!f->status && !f->evict),
                 engram::Code::kInvalidArgument,
                 "--budget and --hot warm; they do not go with --status or --evict");
    if (f->status) {
      auto r = engram::table::Status(f->table);
      PrintStdout(f->json ? r.ToJson() : r.ToText());
      return;
    }
    if (f->evict) {
      uint64_t left = engram::table::Evict(f->table);
      if (f->json)
        PrintStdout("{\"path\":\"" + f->table + "\",\"resident_bytes\":" + std::to_string(left) +
                    "}");
      else
        rep.Log(engram::base::LogLevel::kInfo,
                f->table + ": evicted; " + engram::base::FormatBytes(left) + " still resident");
      return;
    }
    // Block the stop signals before any thread starts, so that sigwait sees them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    if (f->lock) pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    // --lock: pins the ranges (all of the table when none) until a stop signal.
    auto pin_until_stopped = [&](const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
      engram::table::ResidentLock pin(f->table, ranges);
      rep.Log(engram::base::LogLevel::kInfo,
              f->table + ": " + engram::base::FormatBytes(pin.bytes()) +
                  " locked in memory; interrupt (Ctrl-C) to release");
      int sig = 0;
      sigwait(&stop, &sig);
      rep.Log(engram::base::LogLevel::kInfo, f->table + ": released");
    };
    uint64_t file_bytes;
    {
      engram::base::UniqueFd fd = engram::base::OpenFile(f->table, O_RDONLY);
      file_bytes = engram::base::RegularFileSize(fd.get(), f->table);
    }
    if (!f->budget.empty() || !f->hot.empty()) {
      const uint64_t budget =
          f->budget.empty() ? file_bytes : engram::base::ParseSize(f->budget, "--budget");
      std::vector<uint64_t> trace;
      if (!f->hot.empty()) {
        const auto layout = engram::format::Reader::Open(f->table)->layout();
        trace = engram::table::RowTrace(layout, ReadDocuments(f->hot, "", layout, "", UINT64_MAX));
        ENGRAM_CHECK(!trace.empty(), engram::Code::kInvalidArgument,
                     f->hot << ": the trace reads no rows (no request of at least 2 tokens)");
      }
      if (f->lock) engram::table::CheckLockable(f->table, std::min(budget, file_bytes));
      auto r = engram::table::WarmHottest(f->table, budget, f->threads, rep, trace);
      char share[32];
      std::snprintf(share, sizeof share, "%.1f%%", 100 * r.lookup_share);
      if (f->json)
        PrintStdout("{\"path\":\"" + f->table + "\",\"bytes\":" + std::to_string(r.bytes) +
                    ",\"budget\":" + std::to_string(r.budget) +
                    ",\"warmed_bytes\":" + std::to_string(r.warmed_bytes) +
                    ",\"always_bytes\":" + std::to_string(r.always_bytes) +
                    ",\"row_pages\":" + std::to_string(r.row_pages) +
                    ",\"row_pages_total\":" + std::to_string(r.row_pages_total) +
                    ",\"lookup_share\":" + std::to_string(r.lookup_share) +
                    ",\"ranked_by\":" + (r.from_trace ? "\"trace\"" : "\"stats\"") +
                    ",\"seconds\":" + std::to_string(r.seconds) + "}");
      else
        rep.Log(engram::base::LogLevel::kInfo,
                f->table + ": warmed " + engram::base::FormatBytes(r.warmed_bytes) + " of " +
                    engram::base::FormatBytes(r.bytes) + " in " +
                    engram::base::FormatSeconds(r.seconds) + ": metadata, tags and scales (" +
                    engram::base::FormatBytes(r.always_bytes) + "), then the hottest " +
                    std::to_string(r.row_pages) + " of " + std::to_string(r.row_pages_total) +
                    " row pages, which " +
                    (r.from_trace ? "the trace's reads hit " : "the build corpus's lookups hit ") +
                    share + " of the time");
      if (f->lock) pin_until_stopped(r.ranges);
      return;
    }
    // Said up front: a table larger than the memory free for it cannot stay resident; warming it
    // whole only evicts its own first pages again.
    if (const uint64_t avail = engram::base::AvailableMemoryBytes(); avail && file_bytes > avail)
      rep.Log(engram::base::LogLevel::kWarning,
              f->table + " (" + engram::base::FormatBytes(file_bytes) +
                  ") is larger than the memory available (" + engram::base::FormatBytes(avail) +
                  "): it cannot be resident whole; 'prefetch --budget SIZE' warms the hottest rows "
                  "first");
    if (f->lock) engram::table::CheckLockable(f->table, file_bytes);
    auto r = engram::table::Warm(f->table, f->threads, rep);
    std::string line = f->table + ": " + engram::base::FormatBytes(r.resident) + " of " +
                       engram::base::FormatBytes(r.bytes) + " resident; read " +
                       engram::base::FormatBytes(r.read_bytes) + " in " +
                       engram::base::FormatSeconds(r.seconds) + " (" +
                       engram::base::FormatBytes(r.already_resident) + " were resident already)";
    if (f->json)
      PrintStdout("{\"path\":\"" + f->table + "\",\"bytes\":" + std::to_string(r.bytes) +
                  ",\"resident_bytes\":" + std::to_string(r.resident) +
                  ",\"read_bytes\":" + std::to_string(r.read_bytes) +
                  ",\"already_resident\":" + std::to_string(r.already_resident) +
                  ",\"seconds\":" + std::to_string(r.seconds) + "}");
    else
      rep.Log(engram::base::LogLevel::kInfo, line);
    if (f->lock) pin_until_stopped({});
  });
}

}  // namespace engramctl

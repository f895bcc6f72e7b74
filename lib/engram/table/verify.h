// `engramctl verify`: every check a deployment gate needs, all of them run, every problem
// reported with where it is. Only I/O failures (and tables of another major version) throw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/reporter.h"
#include "engram/config/config.h"

namespace engram::table {

struct Problem {
  uint64_t offset = 0;  // byte offset in the file the problem concerns (0 when global)
  uint64_t length = 0;  // bytes concerned (0 when not a range)
  std::string field;    // "header", "section ROWS chunk 17", "config engram.ngram_order", ...
  Code code = Code::kCorrupt;
  std::string message;
};

struct VerifyOptions {
  int threads = 0;                         // 0 = all cores
  const config::Config* config = nullptr;  // enables the config/table consistency checks
  std::string tokenizer_path;              // expected tokenizer (fingerprint check); "" = none
  double page_cache_margin = 1.15;         // host memory needed = bytes x margin + 1 GiB
};

struct VerifyReport {
  std::string path;
  std::vector<Problem> problems;
  std::vector<std::string> notes;  // observations that do not fail verify
  uint64_t bytes_checksummed = 0;
  uint64_t chunks_checked = 0;
  uint64_t journal_entries = 0;
  double seconds = 0;
  // Up to the end of the chunk checksums and row checks, without the --config checks after them
  // (the tokenizer fingerprint loads tokenizer.json): the text line's rate is taken over this.
  double checksum_seconds = 0;
  bool ok() const noexcept { return problems.empty(); }
  std::string ToJson() const;
  std::string ToText() const;
};

VerifyReport Verify(const std::string& path, const VerifyOptions& opts, base::Reporter& reporter);

// Host memory a table needs resident with page-cache overhead (the margin in VerifyOptions).
uint64_t HostMemoryNeeded(uint64_t table_bytes, double margin);

}  // namespace engram::table

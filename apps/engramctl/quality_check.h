// The quality gate of a converted table (quantize --check-corpus, verify --reference): the model
// scores a corpus with the source table and with the converted one, and compares them.
#pragma once

#include <cstdint>
#include <string>

#include "engram/base/reporter.h"
#include "engram/config/config.h"
#include "engram/table/quantize.h"

namespace CLI {
class App;
}  // namespace CLI

namespace engramctl {

// What the gate measured: the model on the corpus with each table, and the rows it reads.
struct CheckReport {
  uint64_t documents = 0, tokens = 0;
  double mean_kl = 0, p99_kl = 0, max_kl = 0, top1 = 0;
  double ppl_source = 0, ppl_converted = 0, ppl_increase_pct = 0;
  engram::table::RowError read_rows;  // over the distinct rows the corpus reads
  // "check: N tokens in D documents: KL mean ..., p99 ..., max ... nats; top-1 agreement ...%;
  // perplexity A -> B (+C%)"
  std::string Line() const;
  // Empty, or why the measures exceed the bounds (a bound < 0 is off).
  std::string Exceeds(double max_kl, double max_ppl_increase_pct) const;
};

// Whole documents (one a line) of `corpus` up to about max_tokens tokens, scored by the model of
// config_path with `source` and with `converted` (the same layout; journals read).
CheckReport RunCheck(const std::string& config_path, const std::string& source,
                     const std::string& converted, const std::string& corpus, uint64_t max_tokens,
                     int threads, const engram::config::Config& cfg, engram::base::Reporter& rep);

std::string Fmt(const char* format, double v);

// The gate's flags, shared by quantize and verify: --check-corpus, --check-max-tokens, --max-kl,
// --max-ppl-increase. `consequence` says what passing a bound does ("refuse ...", "a problem").
struct CheckFlags {
  std::string corpus;
  uint64_t max_tokens = 0;                    // 0 = all
  double max_kl = -1, max_ppl_increase = -1;  // < 0: off
};
void AddCheckFlags(CLI::App* app, CheckFlags* flags, const std::string& consequence);

}  // namespace engramctl

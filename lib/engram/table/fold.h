// `engramctl sort-buckets`: folds the committed journal into the base in bucket order and leaves
// an empty journal. The new base is written to a temp file and renamed (never rewritten in place),
// so a crash at any point leaves either the old table with its journal or the folded one, and
// running it again is always safe (idempotent: an empty journal is nothing to do).
#pragma once

#include <cstdint>
#include <string>

#include "engram/base/reporter.h"

namespace engram::table {

struct FoldOptions {
  std::string table;
  std::string output;  // "" = replace the table
  bool wait = true;
  int threads = 0;
};

struct FoldResult {
  std::string output;
  uint64_t entries = 0;  // committed journal entries folded
  uint64_t rows = 0;     // distinct rows they wrote (last writer wins)
  uint64_t facts = 0;    // facts the ledger holds after the fold
  bool nothing_to_do = false;
  bool upgraded = false;  // the table was format 3.0/3.1 (no ledger) and is now 3.2
  double seconds = 0;
};

FoldResult SortBuckets(const FoldOptions& opts, base::Reporter& reporter);

}  // namespace engram::table

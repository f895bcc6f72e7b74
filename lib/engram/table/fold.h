// `engramctl sort-buckets`: folds the committed journal into the base and leaves an empty journal.
//
// In place (the default for v3.3 tables, schemas/table_format.md §5.8): only the rows the journal
// names, their pages' checksums and the small metadata tail are written, so a fold costs
// O(journal), not O(table). The committed journal is the redo log and a fold record in the commit
// slot page says how far the fold got: a crash or SIGKILL at any point leaves a table that readers
// see whole (the state before or after), and running sort-buckets again completes it. Readers hold
// the fold lock (format/fold_lock.h) while they read, so none sees rows of two states.
//
// Rewrite (--rewrite, -o OUT, or a table of format 3.0-3.2): a complete new base in a temp file,
// renamed over the table (or written to OUT).
#pragma once

#include <cstdint>
#include <string>

#include "engram/base/reporter.h"

namespace engram::table {

struct FoldOptions {
  std::string table;
  std::string output;    // "" = replace the table
  bool rewrite = false;  // write a new file even when the fold could be done in place
  bool wait = true;
  int threads = 0;
};

struct FoldResult {
  std::string output;
  uint64_t entries = 0;  // committed journal entries folded
  uint64_t rows = 0;     // distinct rows they wrote (last writer wins)
  uint64_t facts = 0;    // facts the ledger holds after the fold
  bool nothing_to_do = false;
  bool upgraded = false;  // the table was format 3.0-3.2 and is now 3.3
  bool in_place = false;
  bool resumed = false;        // an interrupted in-place fold was completed first
  uint64_t bytes_written = 0;  // by the in-place fold (rows' pages, metadata, header)
  int interrupted_by = 0;      // SIGINT/SIGTERM arrived (base::CatchInterrupts)
  bool changed = true;         // with interrupted_by: false = the table is as it was
  double seconds = 0;
};

FoldResult SortBuckets(const FoldOptions& opts, base::Reporter& reporter);

// Copies n bytes between two file mappings on `threads` threads, 64 MiB at a time, unmapping
// both as it goes (resident memory stays bounded). Throws base::Interrupted after SIGINT/SIGTERM.
void ParallelCopy(uint8_t* dst, const uint8_t* src, uint64_t n, int threads);

// Completes an in-place fold that was interrupted (a fold record is present), for writers that
// hold the table's writer lock and have it open read-write as `fd` (append, before it writes).
// Takes the fold lock itself. False when there was nothing to complete.
bool CompleteInterruptedFold(int fd, const std::string& path, bool wait, base::Reporter& reporter);
// The same for a writer that holds nothing yet: takes the writer lock only when a fold record is
// there (append runs it before it loads the model, which then maps the table).
bool CompleteInterruptedFold(const std::string& path, bool wait, base::Reporter& reporter);

}  // namespace engram::table

// `engramctl append`: new fact / domain-term entries written to the table's journal in
// O(entries), crash-safely (schemas/append_entries.md, schemas/table_format.md §5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/format/ledger.h"

namespace engram::table {

// One entry, parsed: an n-gram, its row, and where it goes.
struct PreparedEntry {
  size_t line = 0;              // 1-based line (or row) of the entries file, for messages
  std::vector<uint32_t> canon;  // the n-gram, canonical ids, oldest first
  std::vector<uint32_t> ids;  // its tokenizer ids when the entry gave them or its text; else empty
  std::vector<float> value;   // row_dim values
  int64_t layer_id = -1;      // -1 = every Engram layer
  int64_t head = -1;          // -1 = every head
};

struct AppendOptions {
  std::string table;
  std::string entries;         // .jsonl or .safetensors
  std::string tokenizer_path;  // for "text" entries
  bool wait = true;            // false: fail at once when another writer holds the lock
  bool dry_run = false;        // validate and report, write nothing
  // When set, these entries are written instead of reading `entries` (append --fit computes
  // them); `entries` still names the file in messages.
  const std::vector<PreparedEntry>* prepared = nullptr;
  // Facts to record in the ledger (append --fit): fact records after the entry records, in the
  // same batch. Refused (kInvalidArgument, naming the fix) for a table without the ledger flag.
  const std::vector<format::Fact>* facts = nullptr;
};

struct Displaced {
  uint32_t layer_id = 0, order = 0, head = 0;
  uint64_t bucket = 0;
  uint32_t previous_tag = 0, new_tag = 0;
  uint32_t previous_count = 0;         // the previous owner's corpus count (STATS), 0 if unknown
  std::vector<uint32_t> previous_ids;  // when the previous owner came from the journal
  std::vector<std::string> previous_texts;  // those ids decoded, when a tokenizer is known
  size_t entry_line = 0;                    // 1-based line (or row) of the displacing entry
};

// An entry's n-gram as a person reads it (entries of a file, not --fit rows; needs the tokenizer).
struct NgramTokens {
  size_t line = 0;
  std::vector<uint32_t> canon, ids;  // ids: the entry's own, or each canonical id's first token
  std::vector<std::string> tokens;   // vocabulary strings ("Ġis", "æ·±åº¦")
  std::vector<std::string> texts;  // decoded text (" is", "深度"; <0xE6> for a partial UTF-8 byte)
};

struct AppendResult {
  size_t entries = 0;              // input entries
  size_t records = 0;              // journal records written (one per targeted row)
  size_t facts = 0;                // fact records written (append --fit's ledger)
  std::vector<uint64_t> fact_ids;  // their ids (the records' seq), in the order given
  uint64_t bytes = 0;
  uint64_t journal_entries_before = 0;
  uint64_t tail_truncated = 0;  // uncommitted bytes dropped before writing
  std::vector<Displaced> displaced;
  std::vector<NgramTokens>
      ngrams;  // the first kDescribedEntries entries, when a tokenizer is known
  double seconds = 0;
  std::string ToJson() const;
};

constexpr size_t kDescribedEntries = 100;

// Validates every entry first (throwing kInvalidArgument that lists each bad line: wrong width,
// unknown layer, empty or invalid text, bad order, ...) and only then locks and writes.
AppendResult Append(const AppendOptions& opts, base::Reporter& reporter);

}  // namespace engram::table

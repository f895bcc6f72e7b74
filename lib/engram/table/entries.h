// The append entries file (schemas/append_entries.md), read as JSON Lines one line at a time:
// each line is bounded (length, values, depth) before it is held whole or parsed, so memory stays
// O(the longest line allowed) however hostile the file. The one reader of the format: append's
// entries with values (append.cc) and append --fit's entries to fit (ReadEntriesToFit) both come
// through ForEachEntry.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "engram/base/json.h"

namespace engram::table {

// Bounds on one line of an entries file.
struct EntryLimits {
  size_t max_line_bytes = 1 << 20;
  size_t max_items = 256;        // values in one array or object
  size_t max_total_items = 512;  // values in the whole line
  size_t max_depth = 16;
};

// Why a line is no entry.
enum class EntryProblem {
  kTooLong,    // longer than max_line_bytes
  kNotUtf8,    // invalid UTF-8
  kTooLarge,   // more values than the limits allow
  kNotJson,    // not valid JSON
  kNotObject,  // valid JSON, but not an object
};

// Reads `path` (a file, or a pipe: it is read once, front to back) and calls, for each line that
// is not blank, on_entry(line number, the object) or on_problem(line number, kind, message). The
// message names the problem; the caller adds what a valid entry holds.
void ForEachEntry(
    const std::string& path, const EntryLimits& limits,
    const std::function<void(size_t line, const base::Json& entry)>& on_entry,
    const std::function<void(size_t line, EntryProblem kind, std::string what)>& on_problem);

// Whether an entry gives its row ("value" or "value_ref"): it is stored as given. An entry
// without one is fitted (append --fit computes its rows).
bool HasValue(const base::Json& entry);

// One entry to fit: a fact (the model should continue each of `prompts`, its phrasings, with
// `target`) or a text (text = true, in `target`, no prompts: the model should find it likely).
struct FitEntry {
  size_t line = 0;
  std::vector<std::string> prompts;  // "prompt", or the phrasings of "prompts"
  std::string target;
  bool text = false;
};

// Most phrasings one fact may have ("prompts").
inline constexpr size_t kMaxPhrasings = 16;

// An entries file read for append: the entries to fit and how many lines carry values. Throws
// kInvalidArgument listing every bad line (FILE:LINE: problem): a fit entry with a value, a
// prompt without a target, empty strings, unknown keys, a file mixing both kinds; with
// fit_requested (--fit), also lines that are no entry to fit at all.
struct EntriesToFit {
  std::vector<FitEntry> fit;
  size_t value_entries = 0;  // entries with "value"/"value_ref" (left to table::Append)
};
EntriesToFit ReadEntriesToFit(const std::string& path, bool fit_requested);

}  // namespace engram::table

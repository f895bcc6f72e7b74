// The fact ledger (schemas/table_format.md §5.7, §3.7): every fact append --fit wrote, with the
// phrasings it was fitted on, its target, the margin it was fitted to and the rows it relies on.
// Journal records of type 3 hold the facts of unfolded appends; the FACTS section of the base
// holds the folded ones. Later fits keep these facts (their rows are constraints), `facts --check`
// asks each one again through the model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace engram::format {

// One phrasing of a fact: its text and token ids (the tokenizer the table was built with).
struct FactPrompt {
  std::string text;
  std::vector<uint32_t> ids;
};

struct Fact {
  uint64_t id = 0;                  // the seq of the journal record that first held it (stable)
  uint64_t created_unix = 0;        // when it was appended
  std::vector<FactPrompt> prompts;  // >= 1 phrasings, all fitted
  std::string target;               // what follows each phrasing (usually starts with a space)
  std::vector<uint32_t> target_ids;
  float margin = 0;            // logit lead of every target token when fitted
  bool fitted = false;         // the fit reproduced it after rounding to the table's dtype
  bool text_entry = false;     // a "text" entry (its first two tokens cue the rest)
  bool subject_rows = false;   // fitted with its subject\'s rows too (a later fit may train them)
  size_t line = 0;             // the entries file's line (reports only; not stored)
  std::vector<uint64_t> rows;  // global rows its phrasings read where a token follows; sorted
};

// Fact record payload (§5.7) / one element of the FACTS section (§3.7). Throws kCorrupt when
// the bytes are not a fact of this version (or a count exceeds `max_rows` / the payload).
std::basic_string<uint8_t> EncodeFact(const Fact& f);
Fact DecodeFact(std::span<const uint8_t> payload, uint64_t total_rows);

// FACTS section: u64 count, then each fact as u32 size + payload, padded to 8.
std::basic_string<uint8_t> EncodeFactsSection(const std::vector<Fact>& facts);
std::vector<Fact> DecodeFactsSection(std::span<const uint8_t> bytes, uint64_t total_rows);

}  // namespace engram::format

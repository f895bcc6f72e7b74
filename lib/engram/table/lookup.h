// `engramctl lookup`: per position the token, canonical id and every (layer, order, head)
// bucket; with a table also hit or miss and the owner; a summary with engram_hit_rate and
// `engram bypass` for inputs shorter than the order. Without a table it prints the addressing
// alone so users can check it against another implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/format/reader.h"
#include "engram/format/resolve.h"

namespace engram::table {

struct LookupOptions {
  std::string table_path;        // "" = addressing only, from `layout`
  format::LayoutRequest layout;  // used when there is no table
  bool deterministic_addressing = false;
  // Exactly one input:
  std::string text;           // needs a tokenizer (layout.tokenizer_path)
  std::vector<uint32_t> ids;  // tokenizer ids
  std::vector<uint32_t> canonical_ids;
  int input = 0;        // 0 text, 1 ids, 2 canonical ids
  bool values = false;  // with a table: decode every looked-up row (JSON "values")
};

struct LookupCell {
  uint64_t bucket = 0;
  uint64_t row = 0;
  int8_t hit = -1;         // -1 no table, 0 miss, 1 hit
  uint32_t owner_tag = 0;  // the row's owner (0 = none)
  bool from_journal = false;
  std::vector<float> values;  // the row, decoded (only with LookupOptions::values)
};

struct LookupPosition {
  uint32_t pos = 0;
  std::string token;      // vocabulary string ("" for canonical input)
  std::string text;       // what the token reads as (Tokenizer::TokenText)
  int64_t token_id = -1;  // -1 for canonical input
  uint32_t canonical = 0;
  std::vector<LookupCell> cells;  // [layer][order-2][head]
};

struct LookupResult {
  format::Layout layout;
  bool with_table = false;
  std::vector<LookupPosition> positions;
  uint64_t lookups = 0, hits = 0;  // over positions with a full n-gram
  uint64_t journal_entries = 0;
  std::vector<std::string> notes;  // bypass and low-hit-rate explanations
  bool bypass = false;
  double hit_rate() const noexcept {
    return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0;
  }
  std::string ToText() const;
  std::string ToJson() const;
};

LookupResult Lookup(const LookupOptions& opts);

// What a table scores on its own build corpus: the share of the corpus's n-gram lookups (every
// occurrence, layer, order and head) that hit, i.e. owner counts / occurrences. Recorded in
// PROVENANCE at build ("corpus_hit_rate"); computed from STATS for tables built before that;
// -1 when neither is there.
double CorpusHitRate(const format::Reader& r);

// The explanation due when `rate` over `lookups` is low for this table: below a quarter of its
// own corpus's rate (or below 0.3 when that is unknown) over at least 8 lookups; "" otherwise.
// Held-out text of the corpus's own kind scores less than the corpus, and the more buckets, the
// less: of 40 Brown held-out documents against the demo table, the lowest and the median score
// 0.50 and 0.71 of its rate at 2^16 buckets a sub-table, 0.34 and 0.48 at 2^19 (most of their
// 4-grams are not in the corpus). A tokenizer or order mismatch scores about 0.
std::string LowHitRateNote(double rate, uint64_t lookups, double corpus_rate,
                           const format::Layout& l);

}  // namespace engram::table

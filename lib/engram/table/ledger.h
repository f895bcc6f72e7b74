// `engramctl facts`: the fact ledger of a table (schemas/table_format.md §3.7, §5.7), read
// without the model: the folded facts (FACTS) and those still in the journal.
#pragma once

#include <string>
#include <vector>

#include "engram/format/ledger.h"

namespace engram::table {

struct LedgerListing {
  std::vector<format::Fact> folded;   // in the base's FACTS section
  std::vector<format::Fact> journal;  // committed fact records not yet folded
  size_t size() const noexcept { return folded.size() + journal.size(); }
};

// Throws as format::TableView::Open (any addressing: the journal is read).
LedgerListing ReadLedger(const std::string& table_path);

// One line a fact: "#ID "prompt" -> "target" (...)", and the facts as a JSON array.
std::string DescribeFact(const format::Fact& f, bool folded);
std::string FactJson(const format::Fact& f, bool folded);

}  // namespace engram::table

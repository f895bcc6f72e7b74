// A table as lookups see it: the mmap'ed base plus the committed journal overlaid on it (last
// writer wins), or the base alone when deterministic addressing is required, which refuses a
// table that still has unfolded journal entries.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engram/format/journal.h"
#include "engram/format/reader.h"

namespace engram::format {

struct ViewOptions {
  // true: refuse a table with committed journal entries (kConfig, naming the fix).
  bool deterministic_addressing = true;
  OpenOptions open;
};

class TableView {
 public:
  // Throws as Reader::Open; kCorrupt when committed journal data is damaged or missing
  // (RequireIntact: only a torn uncommitted tail is ignored); and kConfig "deterministic
  // addressing requires sorted bucket ids..."
  static std::unique_ptr<TableView> Open(const std::string& path, const ViewOptions& opts = {});

  const Reader& reader() const noexcept { return *reader_; }
  const Layout& layout() const noexcept { return reader_->layout(); }
  const JournalState& journal() const noexcept { return journal_; }

  // The latest committed journal entry for a row, or nullptr.
  const JournalEntry* Overlay(uint64_t row) const noexcept {
    if (journal_.overlay.empty()) return nullptr;
    auto it = journal_.overlay.find(row);
    return it == journal_.overlay.end() ? nullptr : &journal_.committed[it->second];
  }
  uint32_t Tag(uint64_t row) const noexcept {
    const JournalEntry* e = Overlay(row);
    return e ? e->tag : reader_->Tag(row);
  }
  const uint8_t* RowBytes(uint64_t row) const noexcept {
    const JournalEntry* e = Overlay(row);
    return e ? e->value.data() : reader_->RowBytes(row);
  }
  const uint8_t* ScaleBytes(uint64_t row) const noexcept {
    const JournalEntry* e = Overlay(row);
    if (e) return layout().scale_stride() ? e->value.data() + layout().row_stride() : nullptr;
    return reader_->ScaleBytes(row);
  }
  void DecodeRowTo(uint64_t row, std::span<float> out) const noexcept {
    base::DecodeRow(layout().dtype, RowBytes(row), ScaleBytes(row), out);
  }
  // The whole fact ledger: the folded facts (FACTS) then the committed fact records, oldest
  // first. Throws kCorrupt when FACTS does not decode.
  std::vector<Fact> Ledger() const {
    std::vector<Fact> all = reader_->Facts();
    all.insert(all.end(), journal_.facts.begin(), journal_.facts.end());
    return all;
  }

 private:
  std::unique_ptr<Reader> reader_;
  JournalState journal_;
};

// The message (and fix) used wherever deterministic addressing meets an unfolded journal.
std::string DeterministicAddressingError(const std::string& path, size_t entries);

}  // namespace engram::format

// Opens a v3 table read-only (mmap by default), validating it in the order of
// schemas/table_format.md §7, and exposes its rows, tags and stats. The hot accessors are
// noexcept and unchecked: everything they rely on was validated by Open().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/format/fold_lock.h"
#include "engram/format/format.h"
#include "engram/format/layout.h"
#include "engram/format/ledger.h"

namespace engram::format {

// How a reader keeps in-place folds out (§5.8, FoldReadLock).
enum class ReadLock {
  kOpen,  // while the file is opened (a table that is mapped for long: prefetch, serve, inspect)
  kHold,  // until the Reader is destroyed (commands that read rows: lookup, export, verify, run)
  kNone,  // never: the caller holds the fold lock itself (sort-buckets)
};

struct OpenOptions {
  bool use_mmap = true;        // false: read the base into memory (config [engram.table] mmap)
  bool check_metadata = true;  // verify checksums of the small metadata sections
  ReadLock lock = ReadLock::kOpen;
};

struct StatsRow {
  uint32_t owner_count = 0;
  uint32_t total_count = 0;
  uint32_t load = 0;
};

// Checks 1..7 of schemas/table_format.md §7 (size, magic, version, header checksum, flags,
// section table, parameters) on an open file and returns the decoded header. Throws kCorrupt or
// kVersion naming the field.
// A header torn while an in-place fold installed it is read from the fold record's copy (§5.8).
Header ReadValidatedHeader(int fd, const std::string& path, uint64_t file_length);
// The fold record (§5.8) of an open table file of `file_length` bytes; false when there is none.
bool ReadFoldRecord(int fd, const std::string& path, uint64_t file_length, FoldRecord* rec);
// The fold record's header copy (zero-extended to kHeaderSize) when the file holds a valid one.
bool ReadFoldHeaderCopy(int fd, const std::string& path, uint64_t file_length, uint8_t* out);

class Reader {
 public:
  // Throws kIo (cannot read), kCorrupt (damaged or not a table, naming the field and offset),
  // kVersion (another major version). The returned Reader is immutable and thread-safe.
  static std::unique_ptr<Reader> Open(const std::string& path, const OpenOptions& opts = {});
  ~Reader();

  const std::string& path() const noexcept { return path_; }
  const Header& header() const noexcept { return header_; }
  const Layout& layout() const noexcept { return layout_; }
  // Length of the file when opened (base + journal).
  uint64_t file_length() const noexcept { return file_length_; }
  bool has_stats() const noexcept { return stats_ != nullptr; }
  bool mapped() const noexcept { return map_.data() != nullptr; }

  // The section entry of a type, or nullptr.
  const SectionEntry* FindSection(SectionType t) const noexcept;
  // The bytes of a section (empty when absent). Valid while the Reader lives.
  std::span<const uint8_t> Section(SectionType t) const noexcept;
  // The base bytes [0, file_size). Valid while the Reader lives.
  std::span<const uint8_t> base_bytes() const noexcept {
    return {data_, static_cast<size_t>(header_.file_size)};
  }

  const uint8_t* RowBytes(uint64_t row) const noexcept { return rows_ + row * header_.row_stride; }
  const uint8_t* ScaleBytes(uint64_t row) const noexcept {
    return scales_ ? scales_ + row * header_.scale_stride : nullptr;
  }
  uint32_t Tag(uint64_t row) const noexcept;
  StatsRow Stats(uint64_t row) const noexcept;
  // Decodes one row to floats (out.size() == row_dim).
  void DecodeRowTo(uint64_t row, std::span<float> out) const noexcept;
  std::string provenance() const;
  // The folded facts of the ledger (FACTS, §3.7), decoded; empty without the section. Throws
  // kCorrupt naming the table when the section does not decode.
  std::vector<Fact> Facts() const;

  // The open file (read-only): for FoldReadLock.
  int fd() const noexcept { return fd_.get(); }
  // Drops the fold lock taken by Open (kHold), e.g. once a view has read the journal.
  void ReleaseReadLock() noexcept { lock_ = FoldReadLock(); }

  // The mapping (for prefetch/advice); empty when opened without mmap.
  const base::MappedFile& mapping() const noexcept { return map_; }

 private:
  Reader() = default;
  std::string path_;
  base::UniqueFd fd_;
  FoldReadLock lock_;
  base::MappedFile map_;
  std::vector<uint8_t> heap_;  // when !use_mmap
  const uint8_t* data_ = nullptr;
  uint64_t file_length_ = 0;
  Header header_;
  Layout layout_;
  const uint8_t* rows_ = nullptr;
  const uint8_t* scales_ = nullptr;
  const uint8_t* tags_ = nullptr;
  const uint8_t* stats_ = nullptr;
};

}  // namespace engram::format

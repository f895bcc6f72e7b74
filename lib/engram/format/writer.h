// Writes a complete v3 table crash-safely: "<path>.tmp.<pid>" is reserved with fallocate (a full
// disk fails before any byte is written), filled through a read-write mapping, checksummed,
// given its header last, fsynced and renamed over <path>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/reporter.h"
#include "engram/format/format.h"
#include "engram/format/layout.h"
#include "engram/format/ledger.h"

namespace engram::format {

struct WriterOptions {
  uint32_t chunk_log2 = kDefaultChunkLog2;
  bool with_stats = true;
  bool sketch_owners = false;  // sets optional flag bit 1
  uint64_t created_unix = 0;   // 0 = now
  int threads = 0;             // checksum threads; 0 = all cores
};

// Byte sizes of a table before it is written (for --dry-run and memory checks).
struct SizePlan {
  uint64_t layout_bytes = 0, canon_bytes = 0, rows_bytes = 0, scales_bytes = 0, tags_bytes = 0,
           stats_bytes = 0, sums_bytes = 0, provenance_bytes = 0;
  uint64_t file_size = 0;
};
// provenance_bytes is an estimate (the section is written last).
SizePlan PlanSizes(const Layout& layout, const WriterOptions& opts,
                   uint64_t provenance_bytes = 4096);

class TableWriter {
 public:
  // Creates and reserves the temp file next to `path`. Rows, scales, tags and stats start zeroed.
  TableWriter(std::string path, Layout layout, WriterOptions opts);
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  const Layout& layout() const noexcept { return layout_; }
  // Section views into the mapping; valid until Commit() or destruction.
  uint8_t* rows() noexcept { return base_ + rows_.offset; }
  uint8_t* scales() noexcept { return base_ + scales_.offset; }
  uint32_t* tags() noexcept { return reinterpret_cast<uint32_t*>(base_ + tags_.offset); }
  uint8_t* stats() noexcept { return opts_.with_stats ? base_ + stats_.offset : nullptr; }
  const std::string& temp_path() const noexcept { return temp_.temp_path(); }

  // JSON object text for the PROVENANCE section (§3.5).
  void SetProvenance(std::string json) { provenance_ = std::move(json); }
  // The folded facts of the ledger (FACTS, §3.7); none by default (no section is written).
  void SetFacts(const std::vector<Fact>& facts) {
    facts_ = facts.empty() ? std::basic_string<uint8_t>() : EncodeFactsSection(facts);
  }

  // Writes metadata sections and checksums, then the header, fsyncs and renames onto the final
  // path. Throws kIo (the temp file is removed and the final path untouched).
  void Commit(base::Reporter& reporter);

 private:
  std::string path_;
  Layout layout_;
  WriterOptions opts_;
  base::TempFile temp_;
  base::MappedFile map_;
  uint8_t* base_ = nullptr;
  SectionEntry layout_sec_, canon_, rows_, scales_, tags_, stats_;
  uint64_t data_end_ = 0;
  std::string provenance_ = "{}";
  std::basic_string<uint8_t> facts_;
};

// PROVENANCE (§3.5) with one more step of a table's history: `step` (a JSON object; "unix" is
// added) appended to the array `key` of the old text, which keeps its last 100 steps so that the
// section stays small. Old text that is not a JSON object is kept as {"previous": old}.
std::string AddProvenanceStep(const std::string& old, const std::string& key,
                              std::vector<std::pair<std::string, base::Json>> step);

// Reserves [offset, offset+len) of fd on disk; ENOSPC becomes a clear kIo "disk full" error.
void Reserve(int fd, uint64_t offset, uint64_t len, const std::string& path);

// Computes the paged checksum (§3.6) of each chunk of a section's bytes [data, data + size) into
// out (ceil(size / chunk) values), in parallel with `threads` threads (0 = all).
// mapped: data lies in a shared file mapping, whose pages are released as they are hashed.
void ChunkChecksums(uint32_t section_type, const uint8_t* data, uint64_t size, uint32_t chunk_log2,
                    uint64_t* out, int threads, bool mapped = false);

}  // namespace engram::format

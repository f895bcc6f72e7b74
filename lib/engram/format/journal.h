// The append journal after a table's base (schemas/table_format.md §5): record codecs, the
// committed-prefix scan, and the overlay index that maps rows to their latest committed entry.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engram/format/format.h"
#include "engram/format/layout.h"
#include "engram/format/ledger.h"

namespace engram::format {

struct JournalEntry {
  uint64_t seq = 0;
  uint64_t record_offset = 0;  // absolute file offset of the record
  uint32_t layer_index = 0;
  uint32_t order = 0;
  uint32_t head = 0;
  uint64_t bucket = 0;
  uint32_t tag = 0;
  std::vector<uint32_t> ids;   // the n-gram's canonical ids, oldest first
  std::vector<uint8_t> value;  // row_stride bytes then scale_stride bytes (storage dtype)
  uint64_t row = 0;            // global row (derived)
};

// A committed entry whose row holds Inf or NaN (verify reports it).
struct NonFiniteRecord {
  uint64_t offset = 0;
  uint32_t layer_index = 0, order = 0, head = 0;
  uint64_t bucket = 0;
  size_t index = 0;  // of the first non-finite value
};

struct JournalState {
  std::vector<JournalEntry> committed;      // in journal order (empty when not kept)
  uint64_t n_committed = 0;                 // committed entry records (kept or not)
  std::vector<Fact> facts;                  // committed fact records (§5.7), in journal order
  uint64_t n_facts = 0;                     // committed fact records (kept or not)
  std::vector<NonFiniteRecord> non_finite;  // committed entries with Inf/NaN values
  uint64_t start = 0;                       // = header.file_size
  uint64_t committed_end = 0;               // absolute offset just after the last valid commit
  uint64_t file_end = 0;                    // file length at scan time
  uint64_t next_seq = 0;                    // seq for the next record appended
  uint64_t n_commits = 0;
  uint64_t tail_bytes() const noexcept { return file_end - committed_end; }
  std::string tail_reason;            // why the scan stopped before file_end (empty if it didn't)
  uint64_t last_commit_checksum = 0;  // checksum field of the last valid commit record
  // Commit slots (§5.6, v3.1 tables): the newest valid slot, if any.
  bool has_slots = false;
  bool slot_valid = false;
  CommitSlot slot;
  // Non-empty when committed data is unreadable or missing (§5.4): a damaged record with
  // committed batches after it, a record whose checksum holds but whose content cannot be
  // (forged or mis-written), or a file shorter than its commit slot says (an incomplete copy).
  // Only a torn tail with nothing committed after it is not damage. Every command refuses such
  // a table (RequireIntact); verify reports it.
  std::string damage;
  uint64_t damage_offset = 0;
  // Row -> index into `committed` of the last entry writing it.
  std::unordered_map<uint64_t, uint32_t> overlay;
  bool empty() const noexcept { return committed.empty(); }
};

// Scans the journal of an open table file (fd, the validated header and layout). Never throws
// for damaged records (they end the committed prefix and set `damage` unless they are a torn
// tail); throws kIo on read errors.
// keep_entries = false (verify, inspect) checks every record the same way but keeps only the
// counts: `committed` and `overlay` stay empty.
JournalState ReadJournal(int fd, const std::string& path, const Header& header,
                         const Layout& layout, uint64_t file_length, bool keep_entries = true);

// For verify: offsets of records after `from` that look like valid commit records (magic, type,
// size and checksum agree) although the sequential scan stopped before them — committed data
// that became unreachable because something before it is damaged.
std::vector<uint64_t> FindStrandedCommits(int fd, const std::string& path, const Header& header,
                                          uint64_t from, uint64_t file_length);

// Throws kCorrupt with js.damage (the message verify reports) when committed data is damaged.
void RequireIntact(const JournalState& js, const std::string& path);

// Records a new commit in the table's commit slots (§5.6) after the journal was fsynced: writes
// the slot not holding the newest state, then fsyncs. No-op for a table without slots.
void WriteCommitSlot(int fd, const std::string& path, const Header& header,
                     const JournalState& before, uint64_t committed_end, uint64_t n_new_entries,
                     uint64_t commit_checksum);

// Record encoders (append). `seed` is the base's header checksum.
void AppendEntryRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed,
                       const JournalEntry& e, const Layout& layout, uint64_t* checksum_out);
// A fact record (§5.7): the ledger's record of a fitted fact; part of its append's batch.
void AppendFactRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed, const Fact& f,
                      uint64_t* checksum_out);
void AppendCommitRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed,
                        uint64_t first_seq, uint64_t n_entries, uint64_t created_unix,
                        uint64_t entries_digest, uint64_t* checksum_out = nullptr);

}  // namespace engram::format

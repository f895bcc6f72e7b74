// On-disk constants and field-by-field codecs of the v3 table file. Mirrors
// schemas/table_format.md; change both together and bump kVersionMajor on any incompatible
// change. Structs here are in-memory views decoded with LE helpers, never overlaid on the mmap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace engram::format {

// §2.1
inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'E', 'N', 'G', 'R', 'A', 'M', '\n'};
inline constexpr uint16_t kVersionMajor = 3;
// 3.1: commit slots (§5.6); 3.2: the fact ledger; 3.3: paged chunk sums and the in-place fold;
// 3.4: int8 and int4 rows (§4)
inline constexpr uint16_t kVersionMinor = 4;
inline constexpr uint32_t kHeaderSize = 4096;
inline constexpr uint32_t kSectionAlign = 64;   // required by readers
inline constexpr uint32_t kWriterAlign = 4096;  // used by writers (page-aligned row data)
inline constexpr uint32_t kMaxSections = 32;
inline constexpr uint32_t kMinChunkLog2 = 12;
inline constexpr uint32_t kMaxChunkLog2 = 30;
inline constexpr uint32_t kDefaultChunkLog2 = 20;  // 1 MiB checksum chunks
inline constexpr uint32_t kMaxRowDim = 65536;

// Field offsets (§2.1).
namespace off {
inline constexpr size_t kMagic = 0;
inline constexpr size_t kVersionMajor = 8;
inline constexpr size_t kVersionMinor = 10;
inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kFileSize = 16;
inline constexpr size_t kRequiredFlags = 24;
inline constexpr size_t kOptionalFlags = 32;
inline constexpr size_t kHeaderChecksum = 40;
inline constexpr size_t kNSections = 48;
inline constexpr size_t kChunkLog2 = 52;
inline constexpr size_t kCreatedUnix = 56;
inline constexpr size_t kAddressing = 64;
inline constexpr size_t kMaxOrder = 68;
inline constexpr size_t kNHeads = 72;
inline constexpr size_t kNLayers = 76;
inline constexpr size_t kSeed = 80;
inline constexpr size_t kLog2Buckets = 88;
inline constexpr size_t kPadId = 92;
inline constexpr size_t kCanonicalVocab = 96;
inline constexpr size_t kTokenizerVocab = 100;
inline constexpr size_t kRowDim = 104;
inline constexpr size_t kDType = 108;
inline constexpr size_t kTotalRows = 112;
inline constexpr size_t kRowStride = 120;
inline constexpr size_t kScaleStride = 124;
inline constexpr size_t kTokenizerFingerprint = 128;
inline constexpr size_t kSumsChecksum = 136;
inline constexpr size_t kOwnerTagSeed = 144;
inline constexpr size_t kReservedA = 152;  // .. 256
inline constexpr size_t kSectionTable = 256;
inline constexpr size_t kSectionEntrySize = 32;
inline constexpr size_t kReservedB = kSectionTable + kMaxSections * kSectionEntrySize;  // 1280
}  // namespace off

// Required flag bits (§2.1): v3.2 tables may hold the fact ledger (FACTS, fact records); v3.3
// tables checksum their chunks by pages (§3.6), which lets a fold update them in place (§5.8);
// v3.4 tables set bit 2 exactly when their rows need a 3.4 reader (§4): int8 or int4 rows, or
// fp8 rows whose width is not a multiple of 32 (a short last scale block).
inline constexpr uint64_t kReqLedger = 1ull << 0;
inline constexpr uint64_t kReqPagedSums = 1ull << 1;
inline constexpr uint64_t kReqV34Rows = 1ull << 2;
inline constexpr uint64_t kKnownRequiredFlags = kReqLedger | kReqPagedSums | kReqV34Rows;
// Optional flag bits (§2.1).
inline constexpr uint64_t kOptHasStats = 1ull << 0;
inline constexpr uint64_t kOptSketchOwners = 1ull << 1;
inline constexpr uint64_t kOptCommitSlots = 1ull << 2;  // v3.1, §5.6

// §5.6 commit slots: two checksummed records of the committed journal length, in a page of the
// base that no section covers, rewritten (alternately) after each append's fsync.
inline constexpr uint64_t kCommitSlotsOffset = 4096;
inline constexpr uint64_t kCommitSlotsBytes = 4096;  // sections start after this page
inline constexpr size_t kCommitSlotSize = 64;
inline constexpr uint64_t kCommitSlotMagic = 0x544F4C53434E4745ull;  // "EGNCSLOT"

struct CommitSlot {
  uint64_t n_commits = 0;             // commit records in the journal when written
  uint64_t committed_end = 0;         // absolute offset just past the last commit record
  uint64_t n_entries = 0;             // committed entry records
  uint64_t last_commit_checksum = 0;  // checksum field of the last commit record
};
// Encodes slot into kCommitSlotSize bytes, checksummed with `seed` (the base's header checksum).
void EncodeCommitSlot(const CommitSlot& slot, uint64_t seed, uint8_t* out);
// Decodes a slot; false when its magic or checksum is wrong (never written, or torn).
bool DecodeCommitSlot(const uint8_t* in, uint64_t seed, CommitSlot* slot);

// §5.8 the fold record: the in-place fold's intent, in the commit slot page after the slots.
inline constexpr uint64_t kFoldRecordOffset = kCommitSlotsOffset + 2 * kCommitSlotSize;  // 4224
inline constexpr size_t kFoldHeaderCopy = 1280;  // header bytes [0, 1280); the rest is zero
inline constexpr size_t kFoldRecordSize = 128 + kFoldHeaderCopy;
inline constexpr uint64_t kFoldRecordMagic = 0x444C4F464E474745ull;  // "EGGNFOLD"
inline constexpr uint64_t kFoldRecordSeed = 0x31444C4F46ull;         // "FOLD1"

struct FoldRecord {
  uint32_t state = 0;                // 1: rows are being applied; 2: the tail is being moved
  uint64_t old_header_checksum = 0;  // of the base being folded
  uint64_t mid_header_checksum = 0;  // of the header that points at the staged tail (state 2)
  uint64_t journal_end = 0;          // committed end of the journal being folded
  uint64_t stage_offset = 0;         // where the new metadata tail was staged
  uint64_t stage_size = 0;
  uint64_t stage_checksum = 0;        // XXH3 of the staged bytes
  uint64_t tail_offset = 0;           // where the tail ends up (the end of the data sections)
  uint8_t header[kFoldHeaderCopy]{};  // the header being installed (zero-extended to 4096)
  uint64_t header_checksum = 0;       // its checksum field
};
// Encodes into kFoldRecordSize bytes; DecodeFoldRecord is false when the magic, a reserved field
// or the checksum is wrong (never written, torn, or zeroed after the fold).
void EncodeFoldRecord(const FoldRecord& r, uint8_t* out);
bool DecodeFoldRecord(const uint8_t* in, FoldRecord* r);

// §3.6 chunk checksums. Flat (tables without kReqPagedSums): XXH3 of the chunk. Paged: the
// wrapping sum over the chunk's 4096-byte pages (counted from the section's start; the last one
// may be shorter) of PageSum. A page's term can be replaced without reading the rest of its chunk.
inline constexpr uint64_t kSumPage = 4096;
uint64_t PageSum(uint32_t section_type, uint64_t offset_in_section, const uint8_t* page,
                 uint64_t len) noexcept;
// chunk: the chunk's bytes; offset_in_section: of its first byte (a multiple of the chunk size).
uint64_t ChunkSum(bool paged, uint32_t section_type, uint64_t offset_in_section,
                  const uint8_t* chunk, uint64_t len) noexcept;

// §3
enum class SectionType : uint32_t {
  kLayout = 1,
  kCanonMap = 2,
  kRows = 3,
  kScales = 4,
  kTags = 5,
  kStats = 6,
  kProvenance = 7,
  kChunkSums = 8,
  kFacts = 9,  // v3.2, §3.7
};
inline constexpr uint32_t kSectionMetadata = 1u << 0;
std::string_view SectionName(uint32_t type) noexcept;  // "LAYOUT", ..., "type 99"

struct SectionEntry {
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t first_chunk = 0;
};

inline constexpr size_t kStatsRowSize = 16;  // §3.3

// Owner counts over occurrences across a STATS section: the share of the build corpus's n-gram
// lookups that hit (PROVENANCE "corpus_hit_rate", §3.5); -1 when the section counts nothing.
double OwnerShare(std::span<const uint8_t> stats) noexcept;
// The sums behind OwnerShare, added to *owner and *total: for a section read a piece at a time.
void AddOwnerCounts(std::span<const uint8_t> stats, uint64_t* owner, uint64_t* total) noexcept;

// Decoded fixed header fields (§2.1).
struct Header {
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = kVersionMinor;
  uint32_t header_size = kHeaderSize;
  uint64_t file_size = 0;
  uint64_t required_flags = 0;
  uint64_t optional_flags = 0;
  uint64_t header_checksum = 0;
  uint32_t n_sections = 0;
  uint32_t chunk_log2 = kDefaultChunkLog2;
  uint64_t created_unix = 0;
  uint32_t addressing = 0;
  uint32_t max_order = 0;
  uint32_t n_heads = 0;
  uint32_t n_layers = 0;
  uint64_t seed = 0;
  uint32_t log2_buckets = 0;
  uint32_t pad_id = 0;
  uint32_t canonical_vocab = 0;
  uint32_t tokenizer_vocab = 0;
  uint32_t row_dim = 0;
  uint32_t dtype = 0;
  uint64_t total_rows = 0;
  uint32_t row_stride = 0;
  uint32_t scale_stride = 0;
  uint64_t tokenizer_fingerprint = 0;
  uint64_t sums_checksum = 0;
  uint64_t owner_tag_seed = 0;
  std::array<SectionEntry, kMaxSections> sections{};
};

// Serialises h into exactly kHeaderSize bytes (reserved bytes zero) and sets the checksum
// field from the serialised bytes. Returns the checksum.
uint64_t EncodeHeader(const Header& h, uint8_t* out);
// Decodes the fields without validating them (Reader::Open validates, in spec order).
Header DecodeHeader(const uint8_t* in);
// XXH3 of the 4096 header bytes with the checksum field taken as zero.
uint64_t ComputeHeaderChecksum(const uint8_t* header_bytes);

// §5.1 journal record header
inline constexpr uint32_t kJournalMagic = 0x4E524A45;  // "EJRN"
inline constexpr uint32_t kRecordEntry = 1;
inline constexpr uint32_t kRecordCommit = 2;
inline constexpr uint32_t kRecordFact = 3;  // v3.2, §5.7
inline constexpr size_t kRecordHeaderSize = 32;
inline constexpr uint32_t kMaxRecordPayload = 16u << 20;
inline constexpr size_t kCommitPayloadSize = 32;
inline constexpr size_t kEntryFixedSize = 32;  // before ids

}  // namespace engram::format

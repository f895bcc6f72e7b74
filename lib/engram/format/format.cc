// Header serialisation (schemas/table_format.md §2), field by field in little-endian.
#include "engram/format/format.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engram/base/endian.h"
#include "engram/hash/checksum.h"

namespace engram::format {

using base::LoadLE;
using base::StoreLE;

std::string_view SectionName(uint32_t type) noexcept {
  switch (static_cast<SectionType>(type)) {
    case SectionType::kLayout:
      return "LAYOUT";
    case SectionType::kCanonMap:
      return "CANON_MAP";
    case SectionType::kRows:
      return "ROWS";
    case SectionType::kScales:
      return "SCALES";
    case SectionType::kTags:
      return "TAGS";
    case SectionType::kStats:
      return "STATS";
    case SectionType::kProvenance:
      return "PROVENANCE";
    case SectionType::kChunkSums:
      return "CHUNK_SUMS";
    case SectionType::kFacts:
      return "FACTS";
  }
  return "unknown";
}

uint64_t ComputeHeaderChecksum(const uint8_t* header_bytes) {
  uint8_t copy[kHeaderSize];
  std::memcpy(copy, header_bytes, kHeaderSize);
  std::memset(copy + off::kHeaderChecksum, 0, 8);
  return hash::Checksum64(copy, kHeaderSize);
}

uint64_t EncodeHeader(const Header& h, uint8_t* o) {
  std::memset(o, 0, kHeaderSize);
  std::memcpy(o + off::kMagic, kMagic.data(), kMagic.size());
  StoreLE<uint16_t>(o + off::kVersionMajor, h.version_major);
  StoreLE<uint16_t>(o + off::kVersionMinor, h.version_minor);
  StoreLE<uint32_t>(o + off::kHeaderSize, h.header_size);
  StoreLE<uint64_t>(o + off::kFileSize, h.file_size);
  StoreLE<uint64_t>(o + off::kRequiredFlags, h.required_flags);
  StoreLE<uint64_t>(o + off::kOptionalFlags, h.optional_flags);
  StoreLE<uint32_t>(o + off::kNSections, h.n_sections);
  StoreLE<uint32_t>(o + off::kChunkLog2, h.chunk_log2);
  StoreLE<uint64_t>(o + off::kCreatedUnix, h.created_unix);
  StoreLE<uint32_t>(o + off::kAddressing, h.addressing);
  StoreLE<uint32_t>(o + off::kMaxOrder, h.max_order);
  StoreLE<uint32_t>(o + off::kNHeads, h.n_heads);
  StoreLE<uint32_t>(o + off::kNLayers, h.n_layers);
  StoreLE<uint64_t>(o + off::kSeed, h.seed);
  StoreLE<uint32_t>(o + off::kLog2Buckets, h.log2_buckets);
  StoreLE<uint32_t>(o + off::kPadId, h.pad_id);
  StoreLE<uint32_t>(o + off::kCanonicalVocab, h.canonical_vocab);
  StoreLE<uint32_t>(o + off::kTokenizerVocab, h.tokenizer_vocab);
  StoreLE<uint32_t>(o + off::kRowDim, h.row_dim);
  StoreLE<uint32_t>(o + off::kDType, h.dtype);
  StoreLE<uint64_t>(o + off::kTotalRows, h.total_rows);
  StoreLE<uint32_t>(o + off::kRowStride, h.row_stride);
  StoreLE<uint32_t>(o + off::kScaleStride, h.scale_stride);
  StoreLE<uint64_t>(o + off::kTokenizerFingerprint, h.tokenizer_fingerprint);
  StoreLE<uint64_t>(o + off::kSumsChecksum, h.sums_checksum);
  StoreLE<uint64_t>(o + off::kOwnerTagSeed, h.owner_tag_seed);
  for (uint32_t i = 0; i < kMaxSections; ++i) {
    uint8_t* e = o + off::kSectionTable + i * off::kSectionEntrySize;
    const SectionEntry& s = h.sections[i];
    StoreLE<uint32_t>(e + 0, s.type);
    StoreLE<uint32_t>(e + 4, s.flags);
    StoreLE<uint64_t>(e + 8, s.offset);
    StoreLE<uint64_t>(e + 16, s.size);
    StoreLE<uint64_t>(e + 24, s.first_chunk);
  }
  uint64_t sum = ComputeHeaderChecksum(o);
  StoreLE<uint64_t>(o + off::kHeaderChecksum, sum);
  return sum;
}

// Slot bytes: magic, n_commits, committed_end, n_entries, last_commit_checksum, 16 reserved
// (zero), XXH3(bytes [0, 56), seed) (§5.6).
void EncodeCommitSlot(const CommitSlot& s, uint64_t seed, uint8_t* o) {
  std::memset(o, 0, kCommitSlotSize);
  StoreLE<uint64_t>(o + 0, kCommitSlotMagic);
  StoreLE<uint64_t>(o + 8, s.n_commits);
  StoreLE<uint64_t>(o + 16, s.committed_end);
  StoreLE<uint64_t>(o + 24, s.n_entries);
  StoreLE<uint64_t>(o + 32, s.last_commit_checksum);
  StoreLE<uint64_t>(o + 56, hash::Checksum64Seeded(o, 56, seed));
}

bool DecodeCommitSlot(const uint8_t* in, uint64_t seed, CommitSlot* s) {
  if (LoadLE<uint64_t>(in) != kCommitSlotMagic) return false;
  if (LoadLE<uint64_t>(in + 56) != hash::Checksum64Seeded(in, 56, seed)) return false;
  if (LoadLE<uint64_t>(in + 40) != 0 || LoadLE<uint64_t>(in + 48) != 0) return false;
  s->n_commits = LoadLE<uint64_t>(in + 8);
  s->committed_end = LoadLE<uint64_t>(in + 16);
  s->n_entries = LoadLE<uint64_t>(in + 24);
  s->last_commit_checksum = LoadLE<uint64_t>(in + 32);
  return true;
}

// Fold record bytes (§5.8): magic, state (u32), reserved (u32), old, mid header checksums,
// journal_end, stage_offset, stage_size, stage_checksum, tail_offset, header_checksum, 32 reserved,
// header copy, XXH3(all before, kFoldRecordSeed).
void EncodeFoldRecord(const FoldRecord& r, uint8_t* o) {
  std::memset(o, 0, kFoldRecordSize);
  StoreLE<uint64_t>(o + 0, kFoldRecordMagic);
  StoreLE<uint32_t>(o + 8, r.state);
  StoreLE<uint64_t>(o + 16, r.old_header_checksum);
  StoreLE<uint64_t>(o + 24, r.mid_header_checksum);
  StoreLE<uint64_t>(o + 32, r.journal_end);
  StoreLE<uint64_t>(o + 40, r.stage_offset);
  StoreLE<uint64_t>(o + 48, r.stage_size);
  StoreLE<uint64_t>(o + 56, r.stage_checksum);
  StoreLE<uint64_t>(o + 64, r.tail_offset);
  StoreLE<uint64_t>(o + 72, r.header_checksum);
  std::memcpy(o + 112, r.header, kFoldHeaderCopy);
  StoreLE<uint64_t>(o + 112 + kFoldHeaderCopy,
                    hash::Checksum64Seeded(o, 112 + kFoldHeaderCopy, kFoldRecordSeed));
}

bool DecodeFoldRecord(const uint8_t* in, FoldRecord* r) {
  if (LoadLE<uint64_t>(in) != kFoldRecordMagic) return false;
  if (LoadLE<uint64_t>(in + 112 + kFoldHeaderCopy) !=
      hash::Checksum64Seeded(in, 112 + kFoldHeaderCopy, kFoldRecordSeed))
    return false;
  if (LoadLE<uint32_t>(in + 12) != 0) return false;
  for (size_t k = 80; k < 112; ++k)
    if (in[k]) return false;
  r->state = LoadLE<uint32_t>(in + 8);
  if (r->state != 1 && r->state != 2) return false;
  r->old_header_checksum = LoadLE<uint64_t>(in + 16);
  r->mid_header_checksum = LoadLE<uint64_t>(in + 24);
  r->journal_end = LoadLE<uint64_t>(in + 32);
  r->stage_offset = LoadLE<uint64_t>(in + 40);
  r->stage_size = LoadLE<uint64_t>(in + 48);
  r->stage_checksum = LoadLE<uint64_t>(in + 56);
  r->tail_offset = LoadLE<uint64_t>(in + 64);
  r->header_checksum = LoadLE<uint64_t>(in + 72);
  std::memcpy(r->header, in + 112, kFoldHeaderCopy);
  return true;
}

uint64_t PageSum(uint32_t section_type, uint64_t offset_in_section, const uint8_t* page,
                 uint64_t len) noexcept {
  return hash::Checksum64Seeded(page, len, (uint64_t{section_type} << 56) ^ offset_in_section);
}

uint64_t ChunkSum(bool paged, uint32_t section_type, uint64_t offset_in_section,
                  const uint8_t* chunk, uint64_t len) noexcept {
  if (!paged) return hash::Checksum64(chunk, len);
  uint64_t sum = 0;
  for (uint64_t at = 0; at < len; at += kSumPage)
    sum += PageSum(section_type, offset_in_section + at, chunk + at, std::min(kSumPage, len - at));
  return sum;
}

Header DecodeHeader(const uint8_t* in) {
  Header h;
  h.version_major = LoadLE<uint16_t>(in + off::kVersionMajor);
  h.version_minor = LoadLE<uint16_t>(in + off::kVersionMinor);
  h.header_size = LoadLE<uint32_t>(in + off::kHeaderSize);
  h.file_size = LoadLE<uint64_t>(in + off::kFileSize);
  h.required_flags = LoadLE<uint64_t>(in + off::kRequiredFlags);
  h.optional_flags = LoadLE<uint64_t>(in + off::kOptionalFlags);
  h.header_checksum = LoadLE<uint64_t>(in + off::kHeaderChecksum);
  h.n_sections = LoadLE<uint32_t>(in + off::kNSections);
  h.chunk_log2 = LoadLE<uint32_t>(in + off::kChunkLog2);
  h.created_unix = LoadLE<uint64_t>(in + off::kCreatedUnix);
  h.addressing = LoadLE<uint32_t>(in + off::kAddressing);
  h.max_order = LoadLE<uint32_t>(in + off::kMaxOrder);
  h.n_heads = LoadLE<uint32_t>(in + off::kNHeads);
  h.n_layers = LoadLE<uint32_t>(in + off::kNLayers);
  h.seed = LoadLE<uint64_t>(in + off::kSeed);
  h.log2_buckets = LoadLE<uint32_t>(in + off::kLog2Buckets);
  h.pad_id = LoadLE<uint32_t>(in + off::kPadId);
  h.canonical_vocab = LoadLE<uint32_t>(in + off::kCanonicalVocab);
  h.tokenizer_vocab = LoadLE<uint32_t>(in + off::kTokenizerVocab);
  h.row_dim = LoadLE<uint32_t>(in + off::kRowDim);
  h.dtype = LoadLE<uint32_t>(in + off::kDType);
  h.total_rows = LoadLE<uint64_t>(in + off::kTotalRows);
  h.row_stride = LoadLE<uint32_t>(in + off::kRowStride);
  h.scale_stride = LoadLE<uint32_t>(in + off::kScaleStride);
  h.tokenizer_fingerprint = LoadLE<uint64_t>(in + off::kTokenizerFingerprint);
  h.sums_checksum = LoadLE<uint64_t>(in + off::kSumsChecksum);
  h.owner_tag_seed = LoadLE<uint64_t>(in + off::kOwnerTagSeed);
  for (uint32_t i = 0; i < kMaxSections; ++i) {
    const uint8_t* e = in + off::kSectionTable + i * off::kSectionEntrySize;
    SectionEntry& s = h.sections[i];
    s.type = LoadLE<uint32_t>(e + 0);
    s.flags = LoadLE<uint32_t>(e + 4);
    s.offset = LoadLE<uint64_t>(e + 8);
    s.size = LoadLE<uint64_t>(e + 16);
    s.first_chunk = LoadLE<uint64_t>(e + 24);
  }
  return h;
}

void AddOwnerCounts(std::span<const uint8_t> stats, uint64_t* owner, uint64_t* total) noexcept {
  for (size_t off = 0; off + kStatsRowSize <= stats.size(); off += kStatsRowSize) {
    *owner += base::LoadLE<uint32_t>(stats.data() + off);
    *total += base::LoadLE<uint32_t>(stats.data() + off + 4);
  }
}

double OwnerShare(std::span<const uint8_t> stats) noexcept {
  uint64_t owner = 0, total = 0;
  AddOwnerCounts(stats, &owner, &total);
  return total ? static_cast<double>(owner) / static_cast<double>(total) : -1;
}

}  // namespace engram::format

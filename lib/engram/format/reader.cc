// Reader::Open: validation in the order of schemas/table_format.md §7, one error per check.
#include "engram/format/reader.h"

#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "engram/base/checked.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/hash/checksum.h"
#include "engram/hash/ngram_hash.h"

namespace engram::format {

using base::LoadLE;

namespace {

constexpr uint32_t kMaxKnownType = static_cast<uint32_t>(SectionType::kFacts);

}  // namespace

Reader::~Reader() = default;

const SectionEntry* Reader::FindSection(SectionType t) const noexcept {
  for (uint32_t i = 0; i < header_.n_sections; ++i)
    if (header_.sections[i].type == static_cast<uint32_t>(t)) return &header_.sections[i];
  return nullptr;
}

std::span<const uint8_t> Reader::Section(SectionType t) const noexcept {
  const SectionEntry* e = FindSection(t);
  if (!e) return {};
  return {data_ + e->offset, static_cast<size_t>(e->size)};
}

uint32_t Reader::Tag(uint64_t row) const noexcept { return LoadLE<uint32_t>(tags_ + row * 4); }

StatsRow Reader::Stats(uint64_t row) const noexcept {
  StatsRow s;
  if (!stats_) return s;
  const uint8_t* p = stats_ + row * kStatsRowSize;
  s.owner_count = LoadLE<uint32_t>(p);
  s.total_count = LoadLE<uint32_t>(p + 4);
  s.load = LoadLE<uint32_t>(p + 8);
  return s;
}

void Reader::DecodeRowTo(uint64_t row, std::span<float> out) const noexcept {
  base::DecodeRow(layout_.dtype, RowBytes(row), ScaleBytes(row), out);
}

std::vector<Fact> Reader::Facts() const {
  auto b = Section(SectionType::kFacts);
  if (b.empty()) return {};
  try {
    return DecodeFactsSection(b, header_.total_rows);
  } catch (const Error& e) {
    ENGRAM_THROW(Code::kCorrupt, path_ << ": " << e.what());
  }
}

std::string Reader::provenance() const {
  auto b = Section(SectionType::kProvenance);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

bool ReadFoldRecord(int fd, const std::string& path, uint64_t len, FoldRecord* rec) {
  if (len < kFoldRecordOffset + kFoldRecordSize) return false;
  uint8_t rb[kFoldRecordSize];
  base::PreadFull(fd, rb, kFoldRecordSize, kFoldRecordOffset, path);
  return DecodeFoldRecord(rb, rec);
}

bool ReadFoldHeaderCopy(int fd, const std::string& path, uint64_t len, uint8_t* out) {
  FoldRecord rec;
  if (!ReadFoldRecord(fd, path, len, &rec)) return false;
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out, rec.header, kFoldHeaderCopy);
  return ComputeHeaderChecksum(out) == rec.header_checksum &&
         LoadLE<uint64_t>(out + off::kHeaderChecksum) == rec.header_checksum;
}

Header ReadValidatedHeader(int fd, const std::string& path, uint64_t len) {
  // 1. size >= header
  ENGRAM_CHECK(len >= kHeaderSize, Code::kCorrupt,
               path << ": truncated: " << len << " bytes, smaller than the " << kHeaderSize
                    << "-byte header; not a complete engram table");
  uint8_t hb[kHeaderSize];
  base::PreadFull(fd, hb, kHeaderSize, 0, path);
  // A header torn by a power loss while an in-place fold installed a new one (§5.8): the fold
  // record holds a copy of the header being written, which describes a complete table.
  if (std::memcmp(hb, kMagic.data(), kMagic.size()) != 0 ||
      ComputeHeaderChecksum(hb) != LoadLE<uint64_t>(hb + off::kHeaderChecksum)) {
    uint8_t copy[kHeaderSize];
    if (ReadFoldHeaderCopy(fd, path, len, copy)) std::memcpy(hb, copy, kHeaderSize);
  }
  // 2. magic
  ENGRAM_CHECK(std::memcmp(hb, kMagic.data(), kMagic.size()) == 0, Code::kCorrupt,
               path << ": header.magic (offset 0) is wrong: not an engram table (or its first "
                       "bytes are damaged)");
  Header h = DecodeHeader(hb);
  // 3. major version
  uint64_t want = ComputeHeaderChecksum(hb);
  ENGRAM_CHECK(
      h.version_major == kVersionMajor, Code::kVersion,
      path << ": header.version_major = " << h.version_major << ", this build reads "
           << kVersionMajor << "; use an engramctl that reads version " << h.version_major
           << " or rebuild the table with 'engramctl build'"
           << (h.version_major < kVersionMajor && want != h.header_checksum
                   ? " (the header checksum does not match either: the header may be damaged)"
                   : ""));
  // 4. header checksum
  ENGRAM_CHECK(want == h.header_checksum, Code::kCorrupt,
               path << ": header checksum mismatch (stored " << std::hex << h.header_checksum
                    << ", computed " << want << std::dec
                    << "): the header (bytes 0..4095) is damaged; restore the table from a copy");
  // 5. required flags
  uint64_t unknown = h.required_flags & ~kKnownRequiredFlags;
  ENGRAM_CHECK(unknown == 0, Code::kVersion,
               path << ": header.required_flags has unknown bits 0x" << std::hex << unknown
                    << std::dec << "; the table needs a newer engramctl");
  ENGRAM_CHECK(h.header_size == kHeaderSize, Code::kCorrupt,
               path << ": header.header_size = " << h.header_size << ", expected " << kHeaderSize);
  ENGRAM_CHECK(h.file_size >= kHeaderSize && h.file_size % kSectionAlign == 0, Code::kCorrupt,
               path << ": header.file_size = " << h.file_size << " is not a valid base size");
  ENGRAM_CHECK(len >= h.file_size, Code::kCorrupt,
               path << ": truncated: the file has " << len << " bytes, header.file_size says "
                    << h.file_size << "; the copy is incomplete");
  ENGRAM_CHECK(h.chunk_log2 >= kMinChunkLog2 && h.chunk_log2 <= kMaxChunkLog2, Code::kCorrupt,
               path << ": header.chunk_log2 = " << h.chunk_log2 << " outside " << kMinChunkLog2
                    << ".." << kMaxChunkLog2);
  // 6. section table
  ENGRAM_CHECK(h.n_sections >= 1 && h.n_sections <= kMaxSections, Code::kCorrupt,
               path << ": header.n_sections = " << h.n_sections << " outside 1.." << kMaxSections);
  {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < h.n_sections; ++i) {
      const SectionEntry& e = h.sections[i];
      ENGRAM_CHECK(e.type >= 1 && e.type <= kMaxKnownType, Code::kCorrupt,
                   path << ": section " << i << " has unknown type " << e.type);
      ENGRAM_CHECK(!(seen & (1u << e.type)), Code::kCorrupt,
                   path << ": section " << SectionName(e.type) << " appears twice");
      seen |= 1u << e.type;
      ENGRAM_CHECK(e.offset >= kHeaderSize && e.offset % kSectionAlign == 0, Code::kCorrupt,
                   path << ": section " << SectionName(e.type) << " offset " << e.offset
                        << " is inside the header or not 64-byte aligned");
      ENGRAM_CHECK(!(h.optional_flags & kOptCommitSlots) ||
                       e.offset >= kCommitSlotsOffset + kCommitSlotsBytes,
                   Code::kCorrupt,
                   path << ": section " << SectionName(e.type) << " offset " << e.offset
                        << " overlaps the commit slot page [" << kCommitSlotsOffset << ", "
                        << kCommitSlotsOffset + kCommitSlotsBytes << ")");
      ENGRAM_CHECK(base::RangeWithin(e.offset, e.size, h.file_size), Code::kCorrupt,
                   path << ": section " << SectionName(e.type) << " [" << e.offset << ", +"
                        << e.size << ") lies outside the base of " << h.file_size << " bytes");
      ranges.emplace_back(e.offset, e.size);
    }
    for (uint32_t i = h.n_sections; i < kMaxSections; ++i) {
      const SectionEntry& e = h.sections[i];
      ENGRAM_CHECK(
          e.type == 0 && e.offset == 0 && e.size == 0 && e.first_chunk == 0 && e.flags == 0,
          Code::kCorrupt, path << ": unused section table entry " << i << " is not zero");
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      ENGRAM_CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first, Code::kCorrupt,
                   path << ": sections overlap at offset " << ranges[i].first);
    for (SectionType t : {SectionType::kLayout, SectionType::kRows, SectionType::kTags,
                          SectionType::kProvenance, SectionType::kChunkSums})
      ENGRAM_CHECK(
          seen & (1u << static_cast<uint32_t>(t)), Code::kCorrupt,
          path << ": required section " << SectionName(static_cast<uint32_t>(t)) << " is missing");
  }
  // 7. parameters
  ENGRAM_CHECK(h.addressing <= 1, Code::kCorrupt,
               path << ": header.addressing = " << h.addressing << " is unknown");
  ENGRAM_CHECK(h.max_order >= hash::kMinOrder && h.max_order <= hash::kMaxOrder, Code::kCorrupt,
               path << ": header.max_order = " << h.max_order << " outside 2.." << hash::kMaxOrder);
  ENGRAM_CHECK(h.n_heads >= 1 && h.n_heads <= hash::kMaxHeads, Code::kCorrupt,
               path << ": header.n_heads = " << h.n_heads << " outside 1.." << hash::kMaxHeads);
  ENGRAM_CHECK(h.n_layers >= 1 && h.n_layers <= hash::kMaxLayers, Code::kCorrupt,
               path << ": header.n_layers = " << h.n_layers << " outside 1.." << hash::kMaxLayers);
  if (h.addressing == 0)
    ENGRAM_CHECK(h.log2_buckets >= 1 && h.log2_buckets <= hash::kMaxLog2Buckets, Code::kCorrupt,
                 path << ": header.log2_buckets = " << h.log2_buckets
                      << ": native tables need a power-of-two bucket count 2^1..2^"
                      << hash::kMaxLog2Buckets);
  else
    ENGRAM_CHECK(h.log2_buckets == 0, Code::kCorrupt,
                 path << ": header.log2_buckets must be 0 in deepseek mode");
  ENGRAM_CHECK(base::IsValidDType(h.dtype), Code::kCorrupt,
               path << ": header.dtype = " << h.dtype << " is unknown");
  const auto dt = static_cast<base::DType>(h.dtype);
  ENGRAM_CHECK(h.row_dim >= 1 && h.row_dim <= kMaxRowDim, Code::kCorrupt,
               path << ": header.row_dim = " << h.row_dim << " outside 1.." << kMaxRowDim);
  {
    Layout probe;
    probe.dtype = dt;
    probe.row_dim = h.row_dim;
    ENGRAM_CHECK(probe.needs_v34_rows() == ((h.required_flags & kReqV34Rows) != 0), Code::kCorrupt,
                 path << ": header.dtype = " << base::DTypeName(dt) << " with row_dim = "
                      << h.row_dim << " and required flag bit 2 (3.4 row encodings) disagree");
  }
  ENGRAM_CHECK(
      h.row_stride == base::RowBytes(dt, h.row_dim), Code::kCorrupt,
      path << ": header.row_stride = " << h.row_stride << " does not match row_dim x dtype size");
  ENGRAM_CHECK(h.scale_stride == base::ScaleBytes(dt, h.row_dim), Code::kCorrupt,
               path << ": header.scale_stride = " << h.scale_stride << " does not match the dtype");
  ENGRAM_CHECK(h.canonical_vocab >= 1 && h.pad_id < h.canonical_vocab, Code::kCorrupt,
               path << ": header.pad_id = " << h.pad_id
                    << " is not below canonical_vocab = " << h.canonical_vocab);

  return h;
}

std::unique_ptr<Reader> Reader::Open(const std::string& path, const OpenOptions& opts) {
  std::unique_ptr<Reader> r(new Reader());
  r->path_ = path;
  r->fd_ = base::OpenFile(path, O_RDONLY);
  const base::UniqueFd& fd = r->fd_;
  // Before anything is read: an in-place fold never runs while the file is read (§5.8).
  if (opts.lock != ReadLock::kNone) r->lock_ = FoldReadLock(fd.get());
  const uint64_t len = base::RegularFileSize(fd.get(), path);
  r->file_length_ = len;
  // Opening reads the header and the small metadata sections only: no readahead around them,
  // so that opening a cold table (inspect, prefetch --status) does not fault its rows in.
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
  const Header h = ReadValidatedHeader(fd.get(), path, len);
  const auto dt = static_cast<base::DType>(h.dtype);

  // Map or read the whole file (base + journal as of now).
  if (opts.use_mmap) {
    r->map_ = base::MappedFile::FromFd(fd.get(), len, base::MappedFile::Mode::kReadOnly, path);
    r->map_.AdviseRandom(0, len);  // until the metadata is checked (see above)
    r->data_ = r->map_.data();
  } else {
    r->heap_.resize(h.file_size);
    base::PreadFull(fd.get(), r->heap_.data(), h.file_size, 0, path);
    r->data_ = r->heap_.data();
  }
  r->header_ = h;

  // 8. metadata checksums
  auto section = [&](SectionType t) { return r->Section(t); };
  auto sums = section(SectionType::kChunkSums);
  ENGRAM_CHECK(sums.size() % 8 == 0, Code::kCorrupt,
               path << ": CHUNK_SUMS size is not a multiple of 8");
  if (opts.check_metadata) {
    ENGRAM_CHECK(hash::Checksum64(sums) == h.sums_checksum, Code::kCorrupt,
                 path << ": CHUNK_SUMS section checksum mismatch; the checksum table is damaged");
  }
  const uint64_t chunk = uint64_t{1} << h.chunk_log2;
  const uint64_t n_sums = sums.size() / 8;
  for (uint32_t i = 0; i < h.n_sections; ++i) {
    const SectionEntry& e = h.sections[i];
    if (e.type == static_cast<uint32_t>(SectionType::kChunkSums)) continue;
    uint64_t n = (e.size + chunk - 1) / chunk;
    ENGRAM_CHECK(e.first_chunk <= n_sums && n <= n_sums - e.first_chunk, Code::kCorrupt,
                 path << ": section " << SectionName(e.type) << " chunk range exceeds CHUNK_SUMS");
    if (!opts.check_metadata || !(e.flags & kSectionMetadata)) continue;
    for (uint64_t c = 0; c < n; ++c) {
      uint64_t begin = c * chunk, clen = std::min(chunk, e.size - begin);
      uint64_t got = ChunkSum((h.required_flags & kReqPagedSums) != 0, e.type, begin,
                              r->data_ + e.offset + begin, clen);
      uint64_t stored = LoadLE<uint64_t>(sums.data() + (e.first_chunk + c) * 8);
      ENGRAM_CHECK(got == stored, Code::kCorrupt,
                   path << ": section " << SectionName(e.type) << " bytes " << e.offset + begin
                        << ".." << e.offset + begin + clen
                        << " fail their checksum; the table's metadata is damaged");
    }
  }

  // 9. layout
  Layout& l = r->layout_;
  l.spec.mode = static_cast<hash::AddressingMode>(h.addressing);
  l.spec.seed = h.seed;
  l.spec.layer_ids.assign(h.n_layers, 0);
  l.spec.max_order = h.max_order;
  l.spec.n_heads = h.n_heads;
  l.spec.pad_id = h.pad_id;
  l.spec.canonical_vocab = h.canonical_vocab;
  l.spec.log2_buckets = h.log2_buckets;
  l.row_dim = h.row_dim;
  l.dtype = dt;
  l.total_rows = h.total_rows;
  l.owner_tag_seed = h.owner_tag_seed;
  l.tokenizer_fingerprint = h.tokenizer_fingerprint;
  DecodeLayoutSection(section(SectionType::kLayout), &l);
  try {
    hash::CheckDerived(l.spec);
  } catch (const Error& e) {
    ENGRAM_THROW(Code::kCorrupt, path << ": LAYOUT: " << e.what());
  }
  uint64_t next = 0;
  for (size_t i = 0; i < l.row_offsets.size(); ++i) {
    ENGRAM_CHECK(l.row_offsets[i] == next, Code::kCorrupt,
                 path << ": LAYOUT: sub-table " << i << " starts at row " << l.row_offsets[i]
                      << ", expected " << next);
    next += l.spec.sizes[i];
  }
  ENGRAM_CHECK(
      next == h.total_rows, Code::kCorrupt,
      path << ": header.total_rows = " << h.total_rows << " but the sub-tables hold " << next);
  ENGRAM_CHECK(h.owner_tag_seed == hash::OwnerTagSeed(h.seed), Code::kCorrupt,
               path << ": header.owner_tag_seed does not match the table seed");

  // 10. section sizes against the layout
  auto expect_size = [&](SectionType t, uint64_t bytes, bool required) {
    const SectionEntry* e = r->FindSection(t);
    if (!required) {
      ENGRAM_CHECK(e == nullptr || e->size == 0, Code::kCorrupt,
                   path << ": section " << SectionName(static_cast<uint32_t>(t))
                        << " present but not expected");
      return;
    }
    ENGRAM_CHECK(e != nullptr, Code::kCorrupt,
                 path << ": section " << SectionName(static_cast<uint32_t>(t)) << " is missing");
    ENGRAM_CHECK(e->size == bytes, Code::kCorrupt,
                 path << ": section " << SectionName(static_cast<uint32_t>(t)) << " is " << e->size
                      << " bytes, the layout needs " << bytes);
  };
  auto rows_bytes = base::CheckedMul(h.total_rows, h.row_stride);
  ENGRAM_CHECK(rows_bytes.has_value(), Code::kCorrupt,
               path << ": total_rows x row_stride overflows");
  expect_size(SectionType::kRows, *rows_bytes, true);
  expect_size(SectionType::kScales, h.total_rows * h.scale_stride, h.scale_stride > 0);
  expect_size(SectionType::kTags, h.total_rows * 4, true);
  expect_size(SectionType::kStats, h.total_rows * kStatsRowSize,
              (h.optional_flags & kOptHasStats) != 0);
  expect_size(SectionType::kCanonMap, uint64_t{h.tokenizer_vocab} * 4, h.tokenizer_vocab > 0);
  if (h.tokenizer_vocab > 0) {
    auto cm = section(SectionType::kCanonMap);
    l.canon_map.resize(h.tokenizer_vocab);
    std::memcpy(l.canon_map.data(), cm.data(), cm.size());
    std::string why = CheckCanonMap(l.canon_map, h.canonical_vocab);
    ENGRAM_CHECK(why.empty(), Code::kCorrupt, path << ": CANON_MAP: " << why);
  }
  if (const SectionEntry* e = r->FindSection(SectionType::kFacts)) {
    ENGRAM_CHECK(h.required_flags & kReqLedger, Code::kCorrupt,
                 path << ": section FACTS in a table without the ledger flag (required bit 0)");
    ENGRAM_CHECK(e->flags & kSectionMetadata, Code::kCorrupt,
                 path << ": section FACTS must be a metadata section (checked at every open)");
  }
  r->rows_ = r->data_ + r->FindSection(SectionType::kRows)->offset;
  if (const SectionEntry* e = r->FindSection(SectionType::kScales))
    r->scales_ = r->data_ + e->offset;
  r->tags_ = r->data_ + r->FindSection(SectionType::kTags)->offset;
  if (const SectionEntry* e = r->FindSection(SectionType::kStats); e && e->size)
    r->stats_ = r->data_ + e->offset;
  r->map_.AdviseNormal(0, len);  // readers that scan sections get the kernel's readahead
  if (opts.lock == ReadLock::kOpen) r->lock_ = FoldReadLock();
  return r;
}

}  // namespace engram::format

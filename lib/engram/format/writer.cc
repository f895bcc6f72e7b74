// TableWriter: temp file + fallocate + mapping, parallel chunk checksums, header last.
#include "engram/format/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>

#include <cstring>
#include <ctime>
#include <exception>
#include <vector>

#include "engram/base/checked.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/hash/checksum.h"

namespace engram::format {

void Reserve(int fd, uint64_t offset, uint64_t len, const std::string& path) {
  if (len == 0) return;
  int r = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(len));
  if (r == EOPNOTSUPP || r == EINVAL) {
    // Filesystems without fallocate: fall back to extending the file (a later write may still
    // fail with ENOSPC, which the writes report).
    base::Truncate(fd, offset + len, path);
    return;
  }
  if (r != 0) {
    ENGRAM_THROW(
        Code::kIo,
        path << ": cannot reserve " << len << " bytes: " << std::strerror(r)
             << (r == ENOSPC ? "; the disk is full: free space or write the table elsewhere" : ""));
  }
}

void ChunkChecksums(uint32_t section_type, const uint8_t* data, uint64_t size, uint32_t chunk_log2,
                    uint64_t* out, int threads, bool mapped) {
  const uint64_t chunk = uint64_t{1} << chunk_log2;
  const int64_t n = static_cast<int64_t>((size + chunk - 1) / chunk);
  if (threads <= 0) threads = omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t begin = static_cast<uint64_t>(i) * chunk;
    uint64_t len = std::min(chunk, size - begin);
    out[i] = ChunkSum(/*paged=*/true, section_type, begin, data + begin, len);
    if (mapped) base::ReleaseMappedPages(data + begin, len);
  }
}

SizePlan PlanSizes(const Layout& l, const WriterOptions& o, uint64_t provenance_bytes) {
  SizePlan p;
  p.layout_bytes = EncodeLayoutSection(l).size();
  p.canon_bytes = l.canon_map.size() * 4;
  p.rows_bytes = l.total_rows * l.row_stride();
  p.scales_bytes = l.total_rows * l.scale_stride();
  p.tags_bytes = l.total_rows * 4;
  p.stats_bytes = o.with_stats ? l.total_rows * kStatsRowSize : 0;
  p.provenance_bytes = provenance_bytes;
  const uint64_t chunk = uint64_t{1} << o.chunk_log2;
  auto chunks = [&](uint64_t s) { return (s + chunk - 1) / chunk; };
  uint64_t n_chunks = chunks(p.layout_bytes) + chunks(p.canon_bytes) + chunks(p.rows_bytes) +
                      chunks(p.scales_bytes) + chunks(p.tags_bytes) + chunks(p.stats_bytes) +
                      chunks(provenance_bytes);
  p.sums_bytes = n_chunks * 8;
  uint64_t at = kHeaderSize + kCommitSlotsBytes;  // §5.6: the slot page stays zero
  for (uint64_t s : {p.layout_bytes, p.canon_bytes, p.rows_bytes, p.scales_bytes, p.tags_bytes,
                     p.stats_bytes, p.sums_bytes}) {
    if (s) at = base::AlignUp(at, kWriterAlign) + s;
  }
  p.file_size = base::AlignUp(base::AlignUp(at, kWriterAlign) + provenance_bytes, kSectionAlign);
  return p;
}

TableWriter::TableWriter(std::string path, Layout layout, WriterOptions opts)
    : path_(std::move(path)), layout_(std::move(layout)), opts_(opts), temp_(path_) {
  ENGRAM_CHECK(opts_.chunk_log2 >= kMinChunkLog2 && opts_.chunk_log2 <= kMaxChunkLog2,
               Code::kInvalidArgument, "checksum chunk 2^" << opts_.chunk_log2 << " out of range");
  uint64_t at = kHeaderSize + kCommitSlotsBytes;  // §5.6: the slot page stays zero
  auto place = [&](SectionEntry* e, SectionType t, uint64_t size, uint32_t flags) {
    e->type = static_cast<uint32_t>(t);
    e->flags = flags;
    e->size = size;
    e->offset = size ? base::AlignUp(at, kWriterAlign) : 0;
    if (size) at = e->offset + size;
  };
  const Layout& l = layout_;
  place(&layout_sec_, SectionType::kLayout, EncodeLayoutSection(l).size(), kSectionMetadata);
  place(&canon_, SectionType::kCanonMap, l.canon_map.size() * 4, kSectionMetadata);
  place(&rows_, SectionType::kRows, l.total_rows * l.row_stride(), 0);
  place(&scales_, SectionType::kScales, l.total_rows * l.scale_stride(), 0);
  place(&tags_, SectionType::kTags, l.total_rows * 4, 0);
  place(&stats_, SectionType::kStats, opts_.with_stats ? l.total_rows * kStatsRowSize : 0, 0);
  data_end_ = base::AlignUp(at, kWriterAlign);
  Reserve(temp_.fd(), 0, data_end_, temp_.temp_path());
  map_ = base::MappedFile::FromFd(temp_.fd(), data_end_, base::MappedFile::Mode::kReadWrite,
                                  temp_.temp_path());
  base_ = map_.mutable_data();
}

TableWriter::~TableWriter() = default;

void TableWriter::Commit(base::Reporter& reporter) {
  const Layout& l = layout_;
  {
    auto lay = EncodeLayoutSection(l);
    std::memcpy(base_ + layout_sec_.offset, lay.data(), lay.size());
    if (!l.canon_map.empty())
      std::memcpy(base_ + canon_.offset, l.canon_map.data(), l.canon_map.size() * 4);
  }
  // Section table order: data sections, then CHUNK_SUMS, FACTS (when the ledger holds any),
  // then PROVENANCE (last, so that a fold can rewrite it without moving anything else).
  std::vector<SectionEntry> secs;
  for (const SectionEntry* e : {&layout_sec_, &canon_, &rows_, &scales_, &tags_, &stats_})
    if (e->size) secs.push_back(*e);
  const uint64_t chunk = uint64_t{1} << opts_.chunk_log2;
  auto n_chunks = [&](uint64_t s) { return (s + chunk - 1) / chunk; };
  SectionEntry sums, facts, prov;
  sums.type = static_cast<uint32_t>(SectionType::kChunkSums);
  sums.flags = kSectionMetadata;
  facts.type = static_cast<uint32_t>(SectionType::kFacts);
  facts.flags = kSectionMetadata;
  facts.size = facts_.size();
  prov.type = static_cast<uint32_t>(SectionType::kProvenance);
  prov.flags = kSectionMetadata;
  prov.size = provenance_.size();
  uint64_t total_chunks = 0;
  for (auto& e : secs) {
    e.first_chunk = total_chunks;
    total_chunks += n_chunks(e.size);
  }
  facts.first_chunk = total_chunks;
  total_chunks += n_chunks(facts.size);
  uint64_t prov_first_chunk = total_chunks;
  total_chunks += n_chunks(prov.size);
  sums.size = total_chunks * 8;
  sums.offset = data_end_;
  uint64_t at = sums.offset + sums.size;
  if (facts.size) {
    facts.offset = base::AlignUp(at, kWriterAlign);
    at = facts.offset + facts.size;
  }
  prov.offset = base::AlignUp(at, kWriterAlign);
  prov.first_chunk = prov_first_chunk;
  const uint64_t file_size = base::AlignUp(prov.offset + prov.size, kSectionAlign);

  std::vector<uint64_t> chunk_sums(total_chunks);
  reporter.Progress("checksums", 0, 0, "bytes");
  for (const auto& e : secs)
    ChunkChecksums(e.type, base_ + e.offset, e.size, opts_.chunk_log2,
                   chunk_sums.data() + e.first_chunk, opts_.threads, /*mapped=*/true);
  ChunkChecksums(facts.type, facts_.data(), facts.size, opts_.chunk_log2,
                 chunk_sums.data() + facts.first_chunk, 1);
  ChunkChecksums(prov.type, reinterpret_cast<const uint8_t*>(provenance_.data()), prov.size,
                 opts_.chunk_log2, chunk_sums.data() + prov.first_chunk, 1);
  reporter.ProgressDone("checksums");

  Reserve(temp_.fd(), data_end_, file_size - data_end_, temp_.temp_path());
  base::PwriteFull(temp_.fd(), chunk_sums.data(), chunk_sums.size() * 8, sums.offset,
                   temp_.temp_path());
  if (facts.size)
    base::PwriteFull(temp_.fd(), facts_.data(), facts_.size(), facts.offset, temp_.temp_path());
  base::PwriteFull(temp_.fd(), provenance_.data(), provenance_.size(), prov.offset,
                   temp_.temp_path());
  // The reservation may round up; the base ends exactly at file_size.
  base::Truncate(temp_.fd(), file_size, temp_.temp_path());

  Header h;
  h.file_size = file_size;
  // v3.2: the ledger may grow in the journal (§5.7); v3.3: chunks are checksummed by pages, so
  // that sort-buckets can fold in place (§5.8).
  h.required_flags = kReqLedger | kReqPagedSums | (l.needs_v34_rows() ? kReqV34Rows : 0);
  h.optional_flags = (opts_.with_stats ? kOptHasStats : 0) |
                     (opts_.sketch_owners ? kOptSketchOwners : 0) | kOptCommitSlots;
  h.chunk_log2 = opts_.chunk_log2;
  h.created_unix = opts_.created_unix ? opts_.created_unix : base::UnixNow();
  h.addressing = static_cast<uint32_t>(l.spec.mode);
  h.max_order = l.spec.max_order;
  h.n_heads = l.spec.n_heads;
  h.n_layers = static_cast<uint32_t>(l.spec.n_layers());
  h.seed = l.spec.seed;
  h.log2_buckets = l.spec.mode == hash::AddressingMode::kNative ? l.spec.log2_buckets : 0;
  h.pad_id = l.spec.pad_id;
  h.canonical_vocab = l.spec.canonical_vocab;
  h.tokenizer_vocab = static_cast<uint32_t>(l.canon_map.size());
  h.row_dim = l.row_dim;
  h.dtype = static_cast<uint32_t>(l.dtype);
  h.total_rows = l.total_rows;
  h.row_stride = l.row_stride();
  h.scale_stride = l.scale_stride();
  h.tokenizer_fingerprint = l.tokenizer_fingerprint;
  h.sums_checksum = hash::Checksum64(chunk_sums.data(), chunk_sums.size() * 8);
  h.owner_tag_seed = l.owner_tag_seed;
  secs.push_back(sums);
  if (facts.size) secs.push_back(facts);
  secs.push_back(prov);
  h.n_sections = static_cast<uint32_t>(secs.size());
  for (size_t i = 0; i < secs.size(); ++i) h.sections[i] = secs[i];
  uint8_t header[kHeaderSize];
  EncodeHeader(h, header);
  // Everything but the header reaches the disk first (kenlm's header-last habit); a crash in
  // between leaves a temp file that no reader ever sees under the final name.
  map_.Sync();
  base::Fsync(temp_.fd(), temp_.temp_path());
  base::PwriteFull(temp_.fd(), header, kHeaderSize, 0, temp_.temp_path());
  map_ = base::MappedFile();
  base_ = nullptr;
  temp_.Commit();
}

std::string AddProvenanceStep(const std::string& old, const std::string& key,
                              std::vector<std::pair<std::string, base::Json>> step) {
  base::Json j;
  try {
    j = base::Json::Parse(old, "provenance", 32);
  } catch (const Error&) {
  }
  if (!j.is_object()) j = base::Json::MakeObject({{"previous", base::Json::MakeString(old)}});
  std::vector<base::Json> steps;
  if (const base::Json* f = j.Find(key); f && f->is_array()) steps = f->items();
  step.emplace_back("unix", base::Json::MakeNumber(static_cast<int64_t>(base::UnixNow())));
  steps.push_back(base::Json::MakeObject(std::move(step)));
  if (steps.size() > 100) steps.erase(steps.begin(), steps.end() - 100);
  j.Set(key, base::Json::MakeArray(std::move(steps)));
  return j.Dump();
}

}  // namespace engram::format

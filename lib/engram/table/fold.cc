// Fold: the in-place protocol of schemas/table_format.md §5.8 (stage the new metadata tail after
// the journal, record the intent, apply the rows' pages, switch the header, move the tail home,
// switch again, truncate), its recovery, and the whole-file rewrite.
#include "engram/table/fold.h"

#include <fcntl.h>
#include <omp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <parallel/algorithm>

#include "engram/base/checked.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/interrupt.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/format/fold_lock.h"
#include "engram/format/view.h"
#include "engram/format/writer.h"
#include "engram/format/writer_lock.h"
#include "engram/hash/checksum.h"

namespace engram::table {

namespace {

using base::AlignUp;
using format::FoldRecord;
using format::Header;
using format::SectionEntry;
using format::SectionType;

// Test hooks for the SIGKILL matrix (tests/cli/sort-buckets/crash-matrix.sh):
// ENGRAM_TEST_FOLD_KILL_AT=N kills this process at the N-th write or sync of an in-place fold;
// ENGRAM_TEST_FOLD_STEPS=1 names each step on stderr as it is passed.
int g_steps = 0;
void Step(const char* name) {
  static const long kill_at = [] {
    const char* e = std::getenv("ENGRAM_TEST_FOLD_KILL_AT");
    return e ? std::atol(e) : -1L;
  }();
  static const int sig = [] {  // ENGRAM_TEST_FOLD_KILL_SIGNAL=2 or 15: an interrupt instead
    const char* e = std::getenv("ENGRAM_TEST_FOLD_KILL_SIGNAL");
    return e ? std::atoi(e) : SIGKILL;
  }();
  static const bool say = [] {
    const char* e = std::getenv("ENGRAM_TEST_FOLD_STEPS");
    return e && *e == '1';
  }();
  ++g_steps;
  if (say) std::fprintf(stderr, "[test] fold step %d: %s\n", g_steps, name);
  if (g_steps == kill_at) ::raise(sig);
}

std::string FoldedProvenance(const std::string& old, uint64_t entries) {
  return format::AddProvenanceStep(
      old, "folded", {{"entries", base::Json::MakeNumber(static_cast<int64_t>(entries))}});
}

// Rows of the committed journal in bucket order: the last entry per row (index into committed).
std::vector<uint32_t> Winners(const format::JournalState& js, int threads) {
  std::vector<std::pair<uint64_t, uint32_t>> order(js.committed.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = {js.committed[i].row, static_cast<uint32_t>(i)};
  __gnu_parallel::sort(order.begin(), order.end(), __gnu_parallel::default_parallel_tag(threads));
  std::vector<uint32_t> winners;
  for (size_t i = 0; i < order.size(); ++i)
    if (i + 1 == order.size() || order[i + 1].first != order[i].first)
      winners.push_back(order[i].second);
  return winners;
}

bool IsTail(uint32_t type) {
  return type == static_cast<uint32_t>(SectionType::kChunkSums) ||
         type == static_cast<uint32_t>(SectionType::kFacts) ||
         type == static_cast<uint32_t>(SectionType::kProvenance);
}

// The header bytes of h (checksum set), and their checksum.
std::vector<uint8_t> HeaderBytes(const Header& h, uint64_t* checksum) {
  std::vector<uint8_t> b(format::kHeaderSize);
  *checksum = format::EncodeHeader(h, b.data());
  return b;
}

// h with its tail sections moved by `delta` bytes and the base ending `end`.
Header MoveTail(Header h, int64_t delta, uint64_t end) {
  for (uint32_t i = 0; i < h.n_sections; ++i)
    if (IsTail(h.sections[i].type))
      h.sections[i].offset =
          static_cast<uint64_t>(static_cast<int64_t>(h.sections[i].offset) + delta);
  h.file_size = end;
  return h;
}

// Pages held at once (1 MiB). Page faults are costly (about 10 us each on this project's VMs):
// a small buffer, reused, is faulted in once, where one of 16,384 pages was faulted page by page
// on every fold. Measured folding 1,000 entries: 0.22-0.24 s rather than 0.37 s on a 64 MiB
// table, 1.22-1.30 s rather than 1.56-1.63 s on a 6.4 GiB one (52K pages).
// ENGRAM_TEST_FOLD_PAGE_BATCH=N: other batches, so that tests cross batch boundaries.
size_t PageBatch() {
  const char* e = std::getenv("ENGRAM_TEST_FOLD_PAGE_BATCH");  // read per fold: tests change it
  return e && std::atol(e) > 0 ? static_cast<size_t>(std::atol(e)) : size_t{256};
}

// One page (§3.6) of a row section with the fold's changes applied.
struct Page {
  uint32_t section = 0;  // index in the header's section table
  uint64_t index = 0;    // page number within the section
  uint8_t* bytes = nullptr;
  uint64_t len = 0;
  uint64_t old_sum = 0;
};

// The pages the journal's winning entries change, read from the file and patched in memory, a
// batch at a time (memory stays bounded however long the journal is). Reading the current bytes
// makes this idempotent: after a crash some pages may already hold their new contents, and
// patching them again changes nothing.
class PagePatcher {
 public:
  PagePatcher(int fd, const std::string& path, const Header& h, const format::Layout& l,
              const format::JournalState& js, const std::vector<uint32_t>& winners)
      : fd_(fd), path_(path), h_(h) {
    auto find = [&](SectionType t) -> int {
      for (uint32_t i = 0; i < h.n_sections; ++i)
        if (h.sections[i].type == static_cast<uint32_t>(t)) return static_cast<int>(i);
      return -1;
    };
    const int rows = find(SectionType::kRows), scales = find(SectionType::kScales),
              tags = find(SectionType::kTags), stats = find(SectionType::kStats);
    tag_bytes_.resize(winners.size() * 4);
    static const uint8_t kZero[4] = {0, 0, 0, 0};
    auto add = [&](int sec, uint64_t off, uint64_t len, const uint8_t* src) {
      if (sec >= 0 && len) changes_.push_back({static_cast<uint32_t>(sec), off, len, src});
    };
    for (size_t w = 0; w < winners.size(); ++w) {
      const format::JournalEntry& e = js.committed[winners[w]];
      base::StoreLE<uint32_t>(tag_bytes_.data() + 4 * w, e.tag);
      add(rows, e.row * l.row_stride(), l.row_stride(), e.value.data());
      add(scales, e.row * l.scale_stride(), l.scale_stride(), e.value.data() + l.row_stride());
      add(tags, e.row * 4, 4, tag_bytes_.data() + 4 * w);
      // owner_count 0 marks an owner set by append (it has no corpus count); totals stay.
      add(stats, e.row * format::kStatsRowSize, 4, kZero);
    }
    std::sort(changes_.begin(), changes_.end());
    for (const Change& c : changes_)
      for (uint64_t p = c.off / format::kSumPage; p <= (c.off + c.len - 1) / format::kSumPage; ++p)
        keys_.emplace_back(c.sec, p);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
  }

  // Calls `each` with every page, in (section, page) order. When all pages fit one batch, a later
  // call finds them in memory as the first one left them (the caller has not written them).
  void ForEach(const std::function<void(const Page&)>& each) {
    const size_t batch = PageBatch();
    if (loaded_all_) {
      for (const Page& pg : pages_) each(pg);
      return;
    }
    buffer_.resize(std::min(batch, keys_.size()) * format::kSumPage);
    size_t next_change = 0;
    for (size_t k0 = 0; k0 < keys_.size(); k0 += batch) {
      const size_t k1 = std::min(keys_.size(), k0 + batch);
      Load(k0, k1);
      // Changes that began in the last batch and run into this one: step back to the first.
      while (next_change > 0 && LastPage(changes_[next_change - 1]) >= keys_[k0]) --next_change;
      for (; next_change < changes_.size(); ++next_change) {
        const Change& c = changes_[next_change];
        if (std::make_pair(c.sec, c.off / format::kSumPage) > keys_[k1 - 1]) break;
        for (uint64_t at = c.off; at < c.off + c.len;) {
          const uint64_t p = at / format::kSumPage, page_off = p * format::kSumPage;
          const auto key = std::make_pair(c.sec, p);
          const uint64_t n = std::min(c.off + c.len, page_off + format::kSumPage) - at;
          if (key >= keys_[k0] && key <= keys_[k1 - 1]) {
            auto it = std::lower_bound(keys_.begin() + k0, keys_.begin() + k1, key);
            Page& pg = pages_[it - (keys_.begin() + k0)];
            std::memcpy(pg.bytes + (at - page_off), c.src + (at - c.off),
                        std::min<uint64_t>(n, pg.len - (at - page_off)));
          }
          at += n;
        }
      }
      for (const Page& pg : pages_) each(pg);
    }
    loaded_all_ = keys_.size() <= batch;
  }

 private:
  struct Change {
    uint32_t sec;
    uint64_t off, len;
    const uint8_t* src;
    bool operator<(const Change& o) const { return sec != o.sec ? sec < o.sec : off < o.off; }
  };
  static std::pair<uint32_t, uint64_t> LastPage(const Change& c) {
    return {c.sec, (c.off + c.len - 1) / format::kSumPage};
  }

  // Reads pages [k0, k1) into the buffer. On a table larger than memory they are cold and
  // scattered: all of them are asked for first (POSIX_FADV_WILLNEED starts the reads without
  // waiting), so that the disk serves many at once; the reads that follow, in file order, find
  // them in the page cache. (Threads reading a cached file in parallel only contend.)
  void Load(size_t k0, size_t k1) {
    pages_.assign(k1 - k0, Page{});
    for (size_t i = k0; i < k1;) {
      size_t j = i + 1;  // a run of adjacent pages of one section: one request
      while (j < k1 && keys_[j].first == keys_[i].first &&
             keys_[j].second == keys_[j - 1].second + 1)
        ++j;
      const SectionEntry& e = h_.sections[keys_[i].first];
      ::posix_fadvise(fd_, static_cast<off_t>(e.offset + keys_[i].second * format::kSumPage),
                      static_cast<off_t>((j - i) * format::kSumPage), POSIX_FADV_WILLNEED);
      i = j;
    }
    for (size_t i = 0; i < pages_.size(); ++i) {
      Page& pg = pages_[i];
      pg.section = keys_[k0 + i].first;
      pg.index = keys_[k0 + i].second;
      const SectionEntry& e = h_.sections[pg.section];
      const uint64_t page_off = pg.index * format::kSumPage;
      pg.bytes = buffer_.data() + i * format::kSumPage;
      pg.len = std::min<uint64_t>(format::kSumPage, e.size - page_off);
      base::PreadFull(fd_, pg.bytes, pg.len, e.offset + page_off, path_);
      pg.old_sum = format::PageSum(e.type, page_off, pg.bytes, pg.len);
    }
  }

  int fd_;
  const std::string& path_;
  const Header& h_;
  std::vector<Change> changes_;
  std::vector<uint8_t> tag_bytes_;
  std::vector<std::pair<uint32_t, uint64_t>> keys_;  // (section, page), sorted
  std::vector<uint8_t> buffer_;
  std::vector<Page> pages_;
  bool loaded_all_ = false;
};

void WriteSlotPage(int fd, const std::string& path, const FoldRecord* rec) {
  std::vector<uint8_t> page(format::kCommitSlotsBytes, 0);  // both commit slots empty
  if (rec)
    format::EncodeFoldRecord(
        *rec, page.data() + (format::kFoldRecordOffset - format::kCommitSlotsOffset));
  base::PwriteFull(fd, page.data(), page.size(), format::kCommitSlotsOffset, path);
}

void Sync(int fd, const std::string& path, const char* name) {
  base::Fsync(fd, path);
  Step(name);
}

void WriteHeader(int fd, const std::string& path, const uint8_t* header_copy) {
  std::vector<uint8_t> page(format::kHeaderSize, 0);
  std::memcpy(page.data(), header_copy, format::kFoldHeaderCopy);
  base::PwriteFull(fd, page.data(), page.size(), 0, path);
  Step("header written");
  Sync(fd, path, "header synced");
}

// Steps 6-10 of §5.8 from a table whose header points at the staged tail: copy the tail home,
// record state 2 with the final header, install it, truncate, clear the record.
uint64_t MoveTailHome(int fd, const std::string& path, FoldRecord rec,
                      const std::vector<uint8_t>& stage) {
  uint64_t written = 0;
  if (rec.state == 1) {
    base::PwriteFull(fd, stage.data(), stage.size(), rec.tail_offset, path);
    written += stage.size();
    Step("tail copied home");
    Sync(fd, path, "tail synced");
    uint8_t mid[format::kHeaderSize] = {};
    std::memcpy(mid, rec.header, format::kFoldHeaderCopy);
    const Header h1 = format::DecodeHeader(mid);
    const Header h2 =
        MoveTail(h1, static_cast<int64_t>(rec.tail_offset) - static_cast<int64_t>(rec.stage_offset),
                 rec.tail_offset + rec.stage_size);
    uint64_t cs;
    std::vector<uint8_t> hb = HeaderBytes(h2, &cs);
    rec.state = 2;
    rec.mid_header_checksum = h1.header_checksum;
    std::memcpy(rec.header, hb.data(), format::kFoldHeaderCopy);
    rec.header_checksum = cs;
    WriteSlotPage(fd, path, &rec);
    written += format::kCommitSlotsBytes;
    Step("record state 2 written");
    Sync(fd, path, "record state 2 synced");
  }
  WriteHeader(fd, path, rec.header);
  written += format::kHeaderSize;
  base::Truncate(fd, rec.tail_offset + rec.stage_size, path);
  Step("truncated");
  Sync(fd, path, "truncation synced");
  WriteSlotPage(fd, path, nullptr);
  written += format::kCommitSlotsBytes;
  Step("record cleared");
  Sync(fd, path, "record clear synced");
  return written;
}

std::vector<uint8_t> ReadStage(int fd, const std::string& path, const FoldRecord& rec) {
  const uint64_t len = base::RegularFileSize(fd, path);
  ENGRAM_CHECK(rec.stage_offset + rec.stage_size <= len, Code::kCorrupt,
               path << ": an interrupted fold's staged metadata (bytes " << rec.stage_offset
                    << "..) is missing; run 'engramctl sort-buckets --rewrite " << path
                    << "' to rebuild the base from the rows and the journal");
  std::vector<uint8_t> stage(rec.stage_size);
  base::PreadFull(fd, stage.data(), stage.size(), rec.stage_offset, path);
  ENGRAM_CHECK(hash::Checksum64(stage.data(), stage.size()) == rec.stage_checksum, Code::kCorrupt,
               path << ": an interrupted fold's staged metadata fails its checksum; run "
                       "'engramctl sort-buckets --rewrite "
                    << path << "' to rebuild the base from the rows and the journal");
  return stage;
}

// The fold record of the table open as fd, when an in-place fold was interrupted.
bool PendingFold(int fd, const std::string& path, FoldRecord* rec) {
  return format::ReadFoldRecord(fd, path, base::RegularFileSize(fd, path), rec);
}

// The recovery of §5.8 from the table's fold record, with the writer lock and the fold lock held.
void Resume(int fd, const std::string& path, const FoldRecord& rec, base::Reporter& reporter,
            int threads) {
  reporter.Log(base::LogLevel::kInfo, path + ": completing an interrupted fold");
  for (int round = 0; round < 3; ++round) {
    uint8_t hb[format::kHeaderSize];
    base::PreadFull(fd, hb, sizeof hb, 0, path);
    const uint64_t stored = base::LoadLE<uint64_t>(hb + format::off::kHeaderChecksum);
    const bool valid = std::memcmp(hb, format::kMagic.data(), format::kMagic.size()) == 0 &&
                       format::ComputeHeaderChecksum(hb) == stored;
    if (!valid) {  // torn while the record's header was written: write it again
      WriteHeader(fd, path, rec.header);
      continue;
    }
    if (rec.state == 1 && stored == rec.old_header_checksum) {
      // Rows may be half applied; the journal (still the table's) says what they must be.
      std::vector<uint8_t> stage = ReadStage(fd, path, rec);
      format::ViewOptions vo;
      vo.deterministic_addressing = false;
      vo.open.lock = format::ReadLock::kNone;
      auto view = format::TableView::Open(path, vo);
      const Header& h0 = view->reader().header();
      PagePatcher patcher(fd, path, h0, view->layout(), view->journal(),
                          Winners(view->journal(), threads));
      patcher.ForEach([&](const Page& pg) {
        base::PwriteFull(fd, pg.bytes, pg.len,
                         h0.sections[pg.section].offset + pg.index * format::kSumPage, path);
        Step("page applied again");
      });
      Sync(fd, path, "pages synced again");
      WriteHeader(fd, path, rec.header);
      MoveTailHome(fd, path, rec, stage);
      return;
    }
    if (rec.state == 1 && stored == rec.header_checksum) {
      MoveTailHome(fd, path, rec, ReadStage(fd, path, rec));
      return;
    }
    if (rec.state == 2 && (stored == rec.mid_header_checksum || stored == rec.header_checksum)) {
      MoveTailHome(fd, path, rec, {});
      return;
    }
    break;
  }
  // A record that belongs to no state of this file (the file was restored from an older copy,
  // or the header is damaged): nothing can be completed from it.
  ENGRAM_THROW(Code::kCorrupt,
               path << ": the table holds a fold record that matches neither its header before "
                       "nor after the fold; the header may be damaged: restore the table from a "
                       "copy");
}

// Steps 1-10 of §5.8.
void FoldInPlace(int fd, const std::string& path, const format::TableView& view, int threads,
                 FoldResult* res, base::Reporter& reporter) {
  const format::Reader& r = view.reader();
  const Header& h0 = r.header();
  const format::Layout& l = view.layout();
  const format::JournalState& js = view.journal();
  const std::vector<uint32_t> winners = Winners(js, threads);
  res->rows = winners.size();
  reporter.Progress("fold", 0, 4, "steps");

  // The new CHUNK_SUMS: the data sections' sums (numbered first, in section-table order) with
  // each changed page's term replaced, then the new FACTS and PROVENANCE.
  const uint64_t chunk = uint64_t{1} << h0.chunk_log2;
  auto n_chunks = [&](uint64_t s) { return (s + chunk - 1) / chunk; };
  std::span<const uint8_t> old_sums = r.Section(SectionType::kChunkSums);
  std::vector<uint64_t> sums;
  std::vector<uint64_t> new_first(h0.n_sections, 0);
  Header h1 = h0;
  uint32_t n = 0;
  uint64_t data_end = format::kHeaderSize + format::kCommitSlotsBytes;
  for (uint32_t i = 0; i < h0.n_sections; ++i) {
    const SectionEntry& e = h0.sections[i];
    if (IsTail(e.type)) continue;
    new_first[i] = sums.size();
    for (uint64_t c = 0; c < n_chunks(e.size); ++c)
      sums.push_back(base::LoadLE<uint64_t>(old_sums.data() + (e.first_chunk + c) * 8));
    h1.sections[n] = e;
    h1.sections[n].first_chunk = new_first[i];
    ++n;
    data_end = std::max(data_end, e.offset + e.size);
  }
  data_end = AlignUp(data_end, format::kWriterAlign);
  // Each changed page's term replaced: a first pass over the pages reads them (the second, which
  // writes them, finds them in memory, or for a long journal in the page cache).
  PagePatcher patcher(fd, path, h0, l, js, winners);
  patcher.ForEach([&](const Page& pg) {
    const SectionEntry& e = h0.sections[pg.section];
    const uint64_t page_off = pg.index * format::kSumPage;
    uint64_t& s = sums[new_first[pg.section] + page_off / chunk];
    s += format::PageSum(e.type, page_off, pg.bytes, pg.len) - pg.old_sum;
  });
  base::ThrowIfInterrupted();
  const std::vector<format::Fact> ledger = view.Ledger();
  res->facts = ledger.size();
  const std::basic_string<uint8_t> facts =
      ledger.empty() ? std::basic_string<uint8_t>() : format::EncodeFactsSection(ledger);
  const std::string prov = FoldedProvenance(r.provenance(), res->entries);
  SectionEntry se, fe, pe;
  se.type = static_cast<uint32_t>(SectionType::kChunkSums);
  fe.type = static_cast<uint32_t>(SectionType::kFacts);
  pe.type = static_cast<uint32_t>(SectionType::kProvenance);
  se.flags = fe.flags = pe.flags = format::kSectionMetadata;
  fe.size = facts.size();
  pe.size = prov.size();
  fe.first_chunk = sums.size();
  std::vector<uint64_t> tail_sums(n_chunks(fe.size) + n_chunks(pe.size));
  format::ChunkChecksums(fe.type, facts.data(), fe.size, h0.chunk_log2, tail_sums.data(), 1);
  pe.first_chunk = fe.first_chunk + n_chunks(fe.size);
  format::ChunkChecksums(pe.type, reinterpret_cast<const uint8_t*>(prov.data()), pe.size,
                         h0.chunk_log2, tail_sums.data() + n_chunks(fe.size), 1);
  sums.insert(sums.end(), tail_sums.begin(), tail_sums.end());
  se.size = sums.size() * 8;
  // The tail as one position-independent blob (paged sums are seeded by the offset within the
  // section): CHUNK_SUMS, FACTS, PROVENANCE, each on a page boundary.
  se.offset = 0;
  uint64_t at = se.size;
  if (fe.size) {
    fe.offset = AlignUp(at, format::kWriterAlign);
    at = fe.offset + fe.size;
  }
  pe.offset = AlignUp(at, format::kWriterAlign);
  const uint64_t blob_size = AlignUp(pe.offset + pe.size, format::kSectionAlign);
  std::vector<uint8_t> blob(blob_size, 0);
  for (size_t k = 0; k < sums.size(); ++k) base::StoreLE<uint64_t>(blob.data() + 8 * k, sums[k]);
  if (fe.size) std::memcpy(blob.data() + fe.offset, facts.data(), facts.size());
  std::memcpy(blob.data() + pe.offset, prov.data(), prov.size());
  h1.sections[n++] = se;
  if (fe.size) h1.sections[n++] = fe;
  h1.sections[n++] = pe;
  for (uint32_t i = n; i < format::kMaxSections; ++i) h1.sections[i] = SectionEntry{};
  h1.n_sections = n;
  h1.version_minor = format::kVersionMinor;
  h1.sums_checksum = hash::Checksum64(blob.data(), se.size);
  // Stage after everything the table before the fold still needs (its journal) and after the
  // tail's final place, so that neither copy overwrites the other.
  const uint64_t stage_at =
      AlignUp(std::max(js.committed_end, data_end + blob_size), format::kWriterAlign);
  h1 = MoveTail(h1, static_cast<int64_t>(stage_at), stage_at + blob_size);
  uint64_t h1_sum;
  std::vector<uint8_t> h1_bytes = HeaderBytes(h1, &h1_sum);
  reporter.Progress("fold", 1, 4, "steps");

  // 1-2. Stage the tail; before the record exists, the stage is an uncommitted journal tail that
  // every reader ignores, and an interrupt only has to cut it off.
  try {
    base::ThrowIfInterrupted();
    base::PwriteFull(fd, blob.data(), blob.size(), stage_at, path);
    Step("tail staged");
    base::Truncate(fd, stage_at + blob.size(), path);
    Step("stage end set");
    Sync(fd, path, "stage synced");
    base::ThrowIfInterrupted();
  } catch (const base::Interrupted&) {
    base::Truncate(fd, js.committed_end, path);
    throw;
  }
  // 3. The record: from here on the fold is completed, by this run or the next writer.
  FoldRecord rec;
  rec.state = 1;
  rec.old_header_checksum = h0.header_checksum;
  rec.mid_header_checksum = h1_sum;
  rec.journal_end = js.committed_end;
  rec.stage_offset = stage_at;
  rec.stage_size = blob.size();
  rec.stage_checksum = hash::Checksum64(blob.data(), blob.size());
  rec.tail_offset = data_end;
  std::memcpy(rec.header, h1_bytes.data(), format::kFoldHeaderCopy);
  rec.header_checksum = h1_sum;
  WriteSlotPage(fd, path, &rec);
  Step("record state 1 written");
  Sync(fd, path, "record state 1 synced");
  res->changed = true;
  uint64_t written = blob.size() + format::kCommitSlotsBytes;
  // 4. The rows' pages: the journal still overlays every one of them, so readers of the state
  // before the fold see the same rows throughout.
  reporter.Progress("fold", 2, 4, "steps");
  patcher.ForEach([&](const Page& pg) {
    base::PwriteFull(fd, pg.bytes, pg.len,
                     h0.sections[pg.section].offset + pg.index * format::kSumPage, path);
    written += pg.len;
    Step("page applied");
  });
  Sync(fd, path, "pages synced");
  // 5. The switch: the folded table, its tail still at the stage.
  WriteHeader(fd, path, h1_bytes.data());
  written += format::kHeaderSize;
  reporter.Progress("fold", 3, 4, "steps");
  // 6-10.
  written += MoveTailHome(fd, path, rec, blob);
  res->bytes_written = written;
  reporter.ProgressDone("fold");
}

void FoldRewrite(const std::string& out, const format::TableView& view, int threads,
                 FoldResult* res, base::Reporter& reporter) {
  const format::JournalState& js = view.journal();
  const std::vector<uint32_t> winners = Winners(js, threads);
  res->rows = winners.size();
  const format::Reader& r = view.reader();
  const format::Layout& l = r.layout();
  format::WriterOptions wo;
  wo.chunk_log2 = r.header().chunk_log2;
  wo.with_stats = r.has_stats();
  wo.sketch_owners = (r.header().optional_flags & format::kOptSketchOwners) != 0;
  wo.threads = threads;
  format::TableWriter w(out, l, wo);
  reporter.Progress("fold", 0, 4, "steps");
  ParallelCopy(w.rows(), r.RowBytes(0), l.total_rows * l.row_stride(), threads);
  if (l.scale_stride())
    ParallelCopy(w.scales(), r.ScaleBytes(0), l.total_rows * l.scale_stride(), threads);
  ParallelCopy(reinterpret_cast<uint8_t*>(w.tags()), r.Section(SectionType::kTags).data(),
               l.total_rows * 4, threads);
  if (w.stats())
    ParallelCopy(w.stats(), r.Section(SectionType::kStats).data(),
                 l.total_rows * format::kStatsRowSize, threads);
  reporter.Progress("fold", 2, 4, "steps");
  for (uint32_t idx : winners) {
    const format::JournalEntry& e = js.committed[idx];
    std::memcpy(w.rows() + e.row * l.row_stride(), e.value.data(), l.row_stride());
    if (l.scale_stride())
      std::memcpy(w.scales() + e.row * l.scale_stride(), e.value.data() + l.row_stride(),
                  l.scale_stride());
    w.tags()[e.row] = e.tag;
    if (w.stats()) base::StoreLE<uint32_t>(w.stats() + e.row * format::kStatsRowSize, 0);
  }
  const std::vector<format::Fact> ledger = view.Ledger();
  w.SetFacts(ledger);  // folded facts stay in the ledger (FACTS, §3.7)
  res->facts = ledger.size();
  w.SetProvenance(FoldedProvenance(r.provenance(), res->entries));
  reporter.Progress("fold", 3, 4, "steps");
  base::ThrowIfInterrupted();  // the last point where the table is untouched
  w.Commit(reporter);
  res->changed = true;
  reporter.ProgressDone("fold");
}

}  // namespace

void ParallelCopy(uint8_t* dst, const uint8_t* src, uint64_t n, int threads) {
  const uint64_t block = 64ull << 20;
  const int64_t blocks = static_cast<int64_t>((n + block - 1) / block);
  std::atomic<bool> stop{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    if (stop.load(std::memory_order_relaxed) || base::PendingInterrupt()) {
      stop = true;
      continue;
    }
    uint64_t at = static_cast<uint64_t>(b) * block;
    std::memcpy(dst + at, src + at, std::min(block, n - at));
    // Both are file mappings: unmap what was copied (RSS stays bounded; the data stays put).
    base::ReleaseMappedPages(src + at, std::min(block, n - at));
    base::ReleaseMappedPages(dst + at, std::min(block, n - at));
  }
  base::ThrowIfInterrupted();
}

bool CompleteInterruptedFold(int fd, const std::string& path, bool wait, base::Reporter& reporter) {
  FoldRecord rec;
  if (!PendingFold(fd, path, &rec)) return false;
  format::FoldWriteLock fold_lock(fd, path, wait, &reporter);
  Resume(fd, path, rec, reporter, omp_get_max_threads());
  return true;
}

bool CompleteInterruptedFold(const std::string& path, bool wait, base::Reporter& reporter) {
  {
    base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
    FoldRecord rec;
    if (!PendingFold(fd.get(), path, &rec)) return false;
  }
  format::WriterLock lock(path, wait, "append", /*read_only=*/false, &reporter);
  return CompleteInterruptedFold(lock.fd(), path, wait, reporter);
}

FoldResult SortBuckets(const FoldOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  FoldResult res;
  res.changed = false;
  // A symlinked table is folded where it lives: renaming over the link would replace the link
  // and leave the real file with its journal.
  std::string table = o.table;
  if (char* real = ::realpath(o.table.c_str(), nullptr)) {
    table = real;
    std::free(real);
  }
  const std::string out = o.output.empty() ? table : o.output;
  res.output = o.output.empty() ? o.table : o.output;  // as the user named it
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  try {
    format::WriterLock lock(table, o.wait, "sort-buckets", /*read_only=*/!o.output.empty(),
                            &reporter);
    format::RemoveStaleTempFiles(out);
    std::unique_ptr<format::FoldWriteLock> fold_lock;
    if (o.output.empty()) {
      // Only a fold that writes the table itself keeps readers out; -o leaves it as it is.
      fold_lock = std::make_unique<format::FoldWriteLock>(lock.fd(), table, o.wait, &reporter);
      FoldRecord rec;
      if (PendingFold(lock.fd(), table, &rec)) {
        Resume(lock.fd(), table, rec, reporter, threads);
        res.resumed = res.changed = true;
      }
    }
    format::ViewOptions vo;
    vo.deterministic_addressing = false;
    vo.open.lock = o.output.empty() ? format::ReadLock::kNone : format::ReadLock::kHold;
    auto view = format::TableView::Open(table, vo);
    const format::JournalState& js = view->journal();
    res.entries = js.committed.size();
    const Header& h = view->reader().header();
    // Tables of format 3.0-3.2 are rewritten once, even with an empty journal: the new base is
    // format 3.3 (fact ledger, paged checksums, commit slots) and can be folded in place after.
    const uint64_t want = format::kReqLedger | format::kReqPagedSums;
    const bool upgrade =
        (h.required_flags & want) != want || !(h.optional_flags & format::kOptCommitSlots);
    if (js.committed.empty() && js.facts.empty() && o.output.empty() && js.tail_bytes() == 0 &&
        !upgrade && !o.rewrite) {
      res.nothing_to_do = true;
      res.seconds = sw.Seconds();
      return res;
    }
    res.upgraded = upgrade;
    if (o.output.empty() && !o.rewrite && !upgrade) {
      res.in_place = true;
      FoldInPlace(lock.fd(), table, *view, threads, &res, reporter);
    } else {
      fold_lock.reset();  // the rename needs no readers out: they keep the file they opened
      FoldRewrite(out, *view, threads, &res, reporter);
    }
  } catch (const base::Interrupted& e) {
    res.interrupted_by = e.signal();
  }
  if (!res.interrupted_by) res.interrupted_by = base::PendingInterrupt();
  res.seconds = sw.Seconds();
  return res;
}

}  // namespace engram::table

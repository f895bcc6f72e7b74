// Verify: header/section validation, parallel chunk checksums, layout, journal, config, memory.
#include "engram/table/verify.h"

#include <fcntl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>

#include "engram/base/dtype.h"
#include "engram/base/endian.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/format/journal.h"
#include "engram/format/reader.h"
#include "engram/format/resolve.h"
#include "engram/hash/checksum.h"

namespace engram::table {

uint64_t HostMemoryNeeded(uint64_t table_bytes, double margin) {
  return static_cast<uint64_t>(static_cast<double>(table_bytes) * margin) + (1ull << 30);
}

namespace {

void Add(VerifyReport* r, uint64_t offset, uint64_t length, std::string field, Code code,
         std::string msg) {
  r->problems.push_back({offset, length, std::move(field), code, std::move(msg)});
}

// The finiteness of ROWS, checked chunk by chunk as the chunks are hashed (issue 15 item 7: a
// second pass through the mapping cost more than the hashing). Rows are checked by the chunk they
// start in; a row running past its chunk's end is completed with a read of its remainder.
struct RowsCheck {
  // null: no check (no readable layout, or ROWS or SCALES not of the layout's size)
  const format::Layout* layout = nullptr;
};

struct StatsCheck {
  uint64_t bad = 0;             // rows whose statistics cannot be (owner > total, or load 0)
  uint64_t first = UINT64_MAX;  // the first such row
};

// Rows [lo, hi) of a STATS section: a branch-free count, then the first bad row if any. The host
// is little-endian (format.h refuses others).
// Built for AVX2 where the CPU has it (target_clones): the count then vectorises.
__attribute__((target_clones("avx2", "default"), optimize("O3"))) uint64_t CountBadStatsRows(
    const uint32_t* v, uint64_t rows) {
  uint32_t n = 0;  // per call: at most a chunk's rows
  for (uint64_t r = 0; r < rows; ++r)
    n += (v[4 * r] > v[4 * r + 1]) | ((v[4 * r + 2] == 0) & (v[4 * r + 1] != 0));
  return n;
}

void CountBadStats(const uint8_t* st, uint64_t lo, uint64_t hi, StatsCheck* out) {
  uint64_t n = 0;
  if (reinterpret_cast<uintptr_t>(st + lo * format::kStatsRowSize) % alignof(uint32_t) == 0) {
    n = CountBadStatsRows(reinterpret_cast<const uint32_t*>(st + lo * format::kStatsRowSize),
                          hi - lo);
  } else {
    for (uint64_t row = lo; row < hi; ++row) {
      uint32_t v[4];
      std::memcpy(v, st + row * format::kStatsRowSize, sizeof v);
      n += (v[0] > v[1]) | ((v[2] == 0) & (v[1] != 0));
    }
  }
  out->bad += n;
  for (uint64_t row = lo; n && row < hi; ++row) {
    uint32_t v[4];
    std::memcpy(v, st + row * format::kStatsRowSize, sizeof v);
    if (v[0] > v[1] || (v[2] == 0 && v[1] != 0)) {
      out->first = std::min(out->first, row);
      break;
    }
  }
}

// Bytes read, hashed and checked at a time: small enough to stay in L2 in between.
constexpr uint64_t kPieceBytes = 128 << 10;

// Chunk checksums of every section (metadata included), in parallel; one problem per bad chunk.
// The STATS plausibility check (an owner's count never exceeds its bucket's total) and the ROWS
// finiteness check (rows_check; ranges with a non-finite value go to *suspect_rows) run on each
// piece right after it is hashed, while it is in cache, instead of a second pass.
// Chunks are read with pread into a per-thread buffer, kPieceBytes at a time, as xxhsum does:
// faulting a large mapping in costs more than the copy. first_task (the journal scan) runs on one
// of the threads before it takes chunks.
void CheckChunks(const format::Header& h, int fd, const uint8_t* data, const std::string& path,
                 int threads, VerifyReport* rep, StatsCheck* stats, const RowsCheck& rows_check,
                 std::vector<std::pair<uint64_t, uint64_t>>* suspect_rows,
                 const std::function<void()>& first_task, base::Reporter& reporter) {
  const format::SectionEntry* sums_e = nullptr;
  for (uint32_t i = 0; i < h.n_sections; ++i)
    if (h.sections[i].type == static_cast<uint32_t>(format::SectionType::kChunkSums))
      sums_e = &h.sections[i];
  if (!sums_e || sums_e->size % 8) {
    Add(rep, 0, 0, "section CHUNK_SUMS", Code::kCorrupt,
        "CHUNK_SUMS is missing or malformed; chunks cannot be checked");
    if (first_task) first_task();
    return;
  }
  const uint8_t* sums = data + sums_e->offset;
  if (hash::Checksum64(sums, sums_e->size) != h.sums_checksum)
    Add(rep, sums_e->offset, sums_e->size, "section CHUNK_SUMS", Code::kCorrupt,
        "the checksum table itself fails header.sums_checksum: it is damaged, so chunk results "
        "below may be false alarms");
  const uint64_t chunk = uint64_t{1} << h.chunk_log2;
  const uint64_t n_sums = sums_e->size / 8;
  const bool paged = (h.required_flags & format::kReqPagedSums) != 0;
  static_assert(kPieceBytes % format::kSumPage == 0);
  struct Job {
    uint32_t sec;
    uint64_t begin, len, sum_index;
  };
  std::vector<Job> jobs;
  for (uint32_t i = 0; i < h.n_sections; ++i) {
    const format::SectionEntry& e = h.sections[i];
    if (e.type == static_cast<uint32_t>(format::SectionType::kChunkSums)) continue;
    uint64_t n = (e.size + chunk - 1) / chunk;
    if (e.first_chunk > n_sums || n > n_sums - e.first_chunk) {
      Add(rep, e.offset, e.size, std::string("section ") + std::string(format::SectionName(e.type)),
          Code::kCorrupt, "its chunk range runs past CHUNK_SUMS");
      continue;
    }
    for (uint64_t c = 0; c < n; ++c) {
      uint64_t b = e.offset + c * chunk;
      jobs.push_back({i, b, std::min(chunk, e.size - c * chunk), e.first_chunk + c});
    }
  }
  if (threads <= 0) threads = omp_get_max_threads();
  std::vector<uint8_t> bad(jobs.size(), 0);
  std::vector<StatsCheck> stats_jobs(jobs.size());
  // Per job, the rows [first, end) it checked for finiteness, with end = 0 when all are finite.
  std::vector<std::pair<uint64_t, uint64_t>> row_jobs(jobs.size(), {0, 0});
  // Scaled dtypes (fp8, int8, int4): rows are checked by their value bytes in ROWS, and by their
  // scales apart, as SCALES is hashed (reading the scales through the mapping beside each piece of
  // rows faulted their pages in: fp8 verify took ~15% longer). Per job, the rows with a scale that
  // could make a value non-finite (base::ScalesSafe); FirstNonFinite decides for them.
  const base::DType dtype = rows_check.layout ? rows_check.layout->dtype : base::DType::kF32;
  const bool fp8 = rows_check.layout && dtype == base::DType::kF8E4M3;
  const bool scaled = rows_check.layout && rows_check.layout->scale_stride() > 0;
  std::vector<std::pair<uint64_t, uint64_t>> scale_jobs(jobs.size(), {0, 0});
  std::atomic<uint64_t> done_bytes{0};
  uint64_t total_bytes = 0;
  for (const auto& j : jobs) total_bytes += j.len;
  const uint64_t n_jobs = jobs.size();
  std::atomic<uint64_t> next_job{0};
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    // Thread 0 runs first_task (the sequential journal scan) first, then joins the others.
    if (first_task && omp_get_thread_num() == 0) {
      try {
        first_task();
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
    // One piece at a time: a buffer of a chunk's size cost more in page faults than the whole
    // of a small table's hashing (~3 ms a MiB of fresh memory on this project's machine).
    std::unique_ptr<uint8_t[]> buf(new uint8_t[kPieceBytes]);  // every byte is read before use
    std::vector<uint8_t> carry;  // a row begun in an earlier piece: its bytes so far
    hash::Checksum64Stream sum;
    for (uint64_t k; (k = next_job.fetch_add(1, std::memory_order_relaxed)) < n_jobs;) {
      const Job& j = jobs[k];
      const format::SectionEntry& e = h.sections[j.sec];
      const uint64_t off = j.begin - e.offset;  // the chunk's start in its section
      const bool stats_sec = e.type == static_cast<uint32_t>(format::SectionType::kStats) &&
                             e.size % format::kStatsRowSize == 0;
      const format::Layout* l =
          e.type == static_cast<uint32_t>(format::SectionType::kRows) ? rows_check.layout : nullptr;
      const uint64_t stride = l ? l->row_stride() : 1;
      const uint64_t first_row = (off + stride - 1) / stride;  // rows that start in the chunk
      uint64_t next_row = first_row;                           // the next row to check
      bool finite = true;
      auto check = [&](const uint8_t* rows, uint64_t count) {
        // Values alone (scales are checked as SCALES is hashed): AllFinite without scales is
        // the bit test for f32/bf16/f16 and true for int8/int4, whose values are integers.
        finite = fp8 ? base::Fp8ValuesFinite(rows, count * l->row_dim)
                     : base::AllFinite(l->dtype, rows, nullptr, count * l->row_dim);
        next_row += count;
      };
      const bool scales_sec =
          scaled && e.type == static_cast<uint32_t>(format::SectionType::kScales);
      carry.clear();
      sum.Reset();
      uint64_t paged_sum = 0;
      bool failed = false;
      for (uint64_t at = 0; at < j.len; at += kPieceBytes) {
        const uint64_t n = std::min(kPieceBytes, j.len - at);
        try {
          base::PreadFull(fd, buf.get(), n, j.begin + at, path);
        } catch (...) {
#pragma omp critical
          if (!error) error = std::current_exception();
          failed = true;
          break;
        }
        const uint64_t lo = off + at;  // the piece's bytes in the section: [lo, lo + n)
        if (paged) {                   // pieces start on page boundaries of the section
          for (uint64_t p = 0; p < n; p += format::kSumPage)
            paged_sum +=
                format::PageSum(e.type, lo + p, buf.get() + p, std::min(format::kSumPage, n - p));
        } else {
          sum.Update(buf.get(), n);
        }
        if (stats_sec)  // 16-byte rows: pieces and chunks hold whole rows
          CountBadStats(buf.get() - lo, lo / format::kStatsRowSize,
                        (lo + n) / format::kStatsRowSize, &stats_jobs[k]);
        if (scales_sec && !base::ScalesSafe(dtype, buf.get(), n)) {
          const uint64_t ss = rows_check.layout->scale_stride();
          const uint64_t r0 = lo / ss,
                         r1 = std::min(rows_check.layout->total_rows, (lo + n + ss - 1) / ss);
          auto& r = scale_jobs[k];
          r = r.second ? std::make_pair(std::min(r.first, r0), std::max(r.second, r1))
                       : std::make_pair(r0, r1);
        }
        if (!l || !finite || next_row >= l->total_rows) continue;
        uint64_t used = 0;     // bytes of the piece before next_row's start
        if (!carry.empty()) {  // complete the row begun before
          used = std::min(stride - carry.size(), n);
          carry.insert(carry.end(), buf.get(), buf.get() + used);
          if (carry.size() < stride) continue;
          check(carry.data(), 1);
          carry.clear();
        } else if (next_row * stride >= lo + n) {
          continue;  // the chunk's first row starts in a later piece
        } else {
          used = next_row * stride - lo;
        }
        const uint64_t whole = std::min(l->total_rows - next_row, (n - used) / stride);
        if (finite && whole) check(buf.get() + used, whole);
        used += whole * stride;
        if (finite && used < n && next_row < l->total_rows)  // a row running on past the piece
          carry.assign(buf.get() + used, buf.get() + n);
      }
      bad[k] = (paged ? paged_sum : sum.Digest()) != base::LoadLE<uint64_t>(sums + j.sum_index * 8);
      if (l && finite && !carry.empty() && !failed) {  // the last row runs on past the chunk
        const uint64_t have = carry.size();
        carry.resize(stride);
        try {
          base::PreadFull(fd, carry.data() + have, stride - have, j.begin + j.len, path);
          check(carry.data(), 1);
        } catch (...) {
#pragma omp critical
          if (!error) error = std::current_exception();
        }
      }
      if (l && !finite)
        row_jobs[k] = {first_row, std::min(l->total_rows, (off + j.len + stride - 1) / stride)};
      uint64_t d = done_bytes.fetch_add(j.len, std::memory_order_relaxed) + j.len;
      if (omp_get_thread_num() == 0) reporter.Progress("verify checksums", d, total_bytes, "bytes");
    }
  }
  if (error) std::rethrow_exception(error);
  reporter.ProgressDone("verify checksums");
  // Ranges of suspect rows, merged: a row is named once however many checks flagged it.
  std::vector<std::pair<uint64_t, uint64_t>> suspect;
  for (const auto* v : {&row_jobs, &scale_jobs})
    for (const auto& r : *v)
      if (r.second) suspect.push_back(r);
  std::sort(suspect.begin(), suspect.end());
  for (const auto& r : suspect)
    if (!suspect_rows->empty() && r.first <= suspect_rows->back().second)
      suspect_rows->back().second = std::max(suspect_rows->back().second, r.second);
    else
      suspect_rows->push_back(r);
  for (const StatsCheck& c : stats_jobs) {
    stats->bad += c.bad;
    stats->first = std::min(stats->first, c.first);
  }
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Job& j = jobs[k];
    const format::SectionEntry& e = h.sections[j.sec];
    if (bad[k]) {
      uint64_t idx = (j.begin - e.offset) / chunk;
      std::ostringstream f, m;
      f << "section " << format::SectionName(e.type) << " chunk " << idx;
      m << "bytes " << j.begin << ".." << j.begin + j.len << " of " << path
        << " fail their checksum (section " << format::SectionName(e.type) << ", chunk " << idx
        << " of " << (e.size + chunk - 1) / chunk << ")";
      Add(rep, j.begin, j.len, f.str(), Code::kCorrupt, m.str());
    }
  }
  rep->bytes_checksummed = total_bytes;
  rep->chunks_checked = jobs.size();
  // Alignment gaps between sections are not checksummed; they must be zero (§1), so any
  // damaged byte anywhere in the base is reported.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint32_t i = 0; i < h.n_sections; ++i)
    ranges.emplace_back(h.sections[i].offset, h.sections[i].size);
  uint64_t at = format::kHeaderSize;
  auto check_gap = [&](uint64_t from, uint64_t to) {
    for (uint64_t k = from; k < to; ++k)
      if (data[k] != 0) {
        Add(rep, k, to - k, "padding", Code::kCorrupt,
            "byte " + std::to_string(k) + " in the alignment gap before offset " +
                std::to_string(to) + " is not zero: the file is damaged there");
        return;
      }
  };
  // The commit slot page (§5.6): each slot is unwritten (all zero) or valid; the rest is zero.
  if (h.optional_flags & format::kOptCommitSlots) {
    ranges.emplace_back(format::kCommitSlotsOffset, format::kCommitSlotsBytes);
    for (uint64_t i = 0; i < 2; ++i) {
      const uint8_t* slot = data + format::kCommitSlotsOffset + i * format::kCommitSlotSize;
      format::CommitSlot unused;
      if (std::all_of(slot, slot + format::kCommitSlotSize, [](uint8_t b) { return b == 0; }) ||
          format::DecodeCommitSlot(slot, h.header_checksum, &unused))
        continue;
      Add(rep, format::kCommitSlotsOffset + i * format::kCommitSlotSize, format::kCommitSlotSize,
          "commit slots", Code::kCorrupt,
          "commit slot " + std::to_string(i) + " at offset " +
              std::to_string(format::kCommitSlotsOffset + i * format::kCommitSlotSize) +
              " fails its checksum: the file is damaged there");
    }
    // A fold record (§5.8) is there only while an in-place fold runs, or after one was killed.
    format::FoldRecord fold;
    if (format::DecodeFoldRecord(data + format::kFoldRecordOffset, &fold)) {
      Add(rep, format::kFoldRecordOffset, format::kFoldRecordSize, "fold record", Code::kCorrupt,
          "an in-place fold of this table was interrupted (" +
              std::string(fold.state == 1 ? "while it applied the journal's rows"
                                          : "while it moved the metadata") +
              "); readers see a complete state, but its checksums are not final: run "
              "'engramctl sort-buckets " +
              rep->path + "' to complete the fold, then verify again");
      check_gap(format::kFoldRecordOffset + format::kFoldRecordSize,
                format::kCommitSlotsOffset + format::kCommitSlotsBytes);
    } else {
      check_gap(format::kCommitSlotsOffset + 2 * format::kCommitSlotSize,
                format::kCommitSlotsOffset + format::kCommitSlotsBytes);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (const auto& [off, size] : ranges) {
    if (off > at) check_gap(at, off);
    at = std::max(at, off + size);
  }
  check_gap(at, h.file_size);
}

// Every stored row value must be finite (§ rows): Inf/NaN would poison the model's activations.
// CheckChunks found the row ranges holding a non-finite value; this names the rows.
void ReportNonFiniteRows(const format::Reader& r,
                         const std::vector<std::pair<uint64_t, uint64_t>>& suspect,
                         VerifyReport* rep) {
  const format::Layout& l = r.layout();
  uint64_t count = 0, first = 0;
  size_t first_value = 0;
  for (const auto& [r0, end] : suspect) {
    for (uint64_t row = r0; row < end; ++row) {
      size_t i = base::FirstNonFinite(l.dtype, r.RowBytes(row), r.ScaleBytes(row), l.row_dim);
      if (i == l.row_dim) continue;
      if (!count++) first = row, first_value = i;
    }
  }
  if (!count) return;
  // Which sub-table the first bad row lies in: the last one whose first row is <= it.
  const size_t sub = l.SubtableOf(first);
  const size_t per_layer = l.spec.per_layer();
  const uint32_t order =
      static_cast<uint32_t>(hash::kMinOrder + (sub % per_layer) / l.spec.n_heads);
  const format::SectionEntry* sec = r.FindSection(format::SectionType::kRows);
  Add(rep, sec ? sec->offset + first * l.row_stride() : 0, l.row_stride(), "section ROWS",
      Code::kCorrupt,
      std::to_string(count) + " row(s) hold non-finite values (Inf or NaN); first: row " +
          std::to_string(first) + " (layer " + std::to_string(l.spec.layer_ids[sub / per_layer]) +
          ", order " + std::to_string(order) + ", head " + std::to_string(sub % l.spec.n_heads) +
          ", bucket " + std::to_string(first - l.row_offsets[sub]) + "), value " +
          std::to_string(first_value) +
          "; rebuild the table from finite values (or append finite replacements and fold)");
}

void CheckConfig(const format::Reader& r, const VerifyOptions& o, bool journal_has_entries,
                 VerifyReport* rep) {
  const config::Config& c = *o.config;
  const format::Layout& l = r.layout();
  for (const std::string& p : config::LayoutProblems(c)) Add(rep, 0, 0, "config", Code::kConfig, p);
  const auto& e = c.engram;
  // Only keys the user set are compared: a default is not a claim about this table.
  auto mismatch = [&](const std::string& key, const std::string& cfg, const std::string& table,
                      const std::string& fix) {
    if (!c.Has(key)) return;
    Add(rep, 0, 0, "config " + key, Code::kConfig,
        c.Where(key) + " = " + cfg + " but the table has " + table + "; " + fix);
  };
  const std::string rebuild = "rebuild the table with 'engramctl build --config " +
                              (c.source_path.empty() ? std::string("CONFIG") : c.source_path) +
                              "' or fix the config";
  if (e.ngram_order != l.spec.max_order)
    mismatch("engram.ngram_order", std::to_string(e.ngram_order),
             "order " + std::to_string(l.spec.max_order), rebuild);
  if (e.n_heads != l.spec.n_heads)
    mismatch("engram.n_heads", std::to_string(e.n_heads), std::to_string(l.spec.n_heads) + " heads",
             rebuild);
  std::string mode(hash::AddressingName(l.spec.mode));
  if (e.addressing != mode)
    mismatch("engram.addressing", "\"" + e.addressing + "\"", mode + " addressing", rebuild);
  if (l.spec.mode == hash::AddressingMode::kNative) {
    uint64_t b = l.spec.sizes.empty() ? 0 : l.spec.sizes[0];
    if (e.hash_buckets != b)
      mismatch("engram.hash_buckets", std::to_string(e.hash_buckets),
               std::to_string(b) + " buckets per sub-table", rebuild);
  } else if (!l.spec.base_sizes.empty() && e.hash_buckets != l.spec.base_sizes[0]) {
    mismatch("engram.hash_buckets", std::to_string(e.hash_buckets),
             "prime sizes based at " + std::to_string(l.spec.base_sizes[0]), rebuild);
  }
  if (e.seed != l.spec.seed)
    mismatch("engram.seed", std::to_string(e.seed), "seed " + std::to_string(l.spec.seed), rebuild);
  if (e.layer_ids != l.spec.layer_ids) {
    std::string t;
    for (auto id : l.spec.layer_ids) t += (t.empty() ? "" : ", ") + std::to_string(id);
    mismatch("engram.layer_ids", "(as listed)", "layers [" + t + "]", rebuild);
  }
  // embed_dim = row width x heads, with the heads the config sets or else the table's.
  const uint32_t heads = c.Has("engram.n_heads") && e.n_heads ? e.n_heads : l.spec.n_heads;
  if (heads && e.embed_dim != uint64_t{l.row_dim} * heads)
    mismatch(
        "engram.embed_dim", std::to_string(e.embed_dim),
        "rows of " + std::to_string(l.row_dim) + " values x " + std::to_string(heads) + " heads",
        "set engram.embed_dim = " + std::to_string(uint64_t{l.row_dim} * heads) + ", or " +
            rebuild);
  if (auto dt = base::ParseDType(e.lookup_dtype); dt && *dt != l.dtype)
    mismatch("engram.lookup_dtype", "\"" + e.lookup_dtype + "\"",
             std::string(base::DTypeName(l.dtype)) + " rows",
             "set engram.lookup_dtype = \"" + std::string(base::DTypeName(l.dtype)) +
                 "\", or rebuild the table with 'engramctl build --dtype " +
                 std::string(base::DTypeName(*dt)) + "'");
  if (!o.tokenizer_path.empty()) {
    uint64_t fp = format::CanonicalInfoFor(o.tokenizer_path).fingerprint;
    if (fp != l.tokenizer_fingerprint)
      Add(
          rep, 0, 0, "config model.tokenizer", Code::kConfig,
          o.tokenizer_path + " has fingerprint " +
              [&] {
                std::ostringstream os;
                os << std::hex << fp;
                return os.str();
              }() +
              " but the table was built " +
              (l.tokenizer_fingerprint ? "with another tokenizer" : "without a tokenizer") +
              "; lookups would address the wrong rows: rebuild the table with this tokenizer");
  }
  if (e.offload_to_host && !e.deterministic_addressing)
    Add(rep, 0, 0, "config engram.offload_to_host", Code::kConfig,
        c.Where("engram.offload_to_host") +
            " = true needs engram.deterministic_addressing = true: rows are "
            "prefetched from host memory before the layer runs, which needs addresses that depend "
            "only on token ids");
  if (e.deterministic_addressing && journal_has_entries)
    Add(rep, 0, 0, "journal", Code::kConfig,
        "deterministic addressing requires sorted bucket ids: the table has appended entries not "
        "yet folded "
        "into its base; run 'engramctl sort-buckets " +
            r.path() + "'");
  uint64_t bytes = r.file_length();
  if (e.host_memory_limit_gb > 0) {
    double limit = e.host_memory_limit_gb * 1e9;
    if (static_cast<double>(bytes) > limit)
      Add(rep, 0, 0, "config engram.host_memory_limit_gb", Code::kConfig,
          "the table is " + base::FormatGB(static_cast<double>(bytes)) + ", larger than " +
              c.Where("engram.host_memory_limit_gb") + " = " + base::FormatGB(limit) +
              "; raise the limit or use a smaller table (the table is never loaded into device "
              "memory instead)");
  }
}

}  // namespace

VerifyReport Verify(const std::string& path, const VerifyOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  VerifyReport rep;
  rep.path = path;
  base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
  // To the end: a fold waits for verify instead of changing chunks under it (§5.8).
  format::FoldReadLock fold_lock(fd.get());
  const uint64_t len = base::RegularFileSize(fd.get(), path);
  format::Header h;
  try {
    h = format::ReadValidatedHeader(fd.get(), path, len);
  } catch (const Error& e) {
    if (e.code() != Code::kCorrupt) throw;
    Add(&rep, 0, format::kHeaderSize, "header", Code::kCorrupt, e.what());
    rep.seconds = sw.Seconds();
    return rep;
  }
  base::MappedFile map =
      base::MappedFile::FromFd(fd.get(), h.file_size, base::MappedFile::Mode::kReadOnly, path);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  // The layout first (metadata only), so that the journal scan, which needs it, runs beside the
  // parallel chunk checksums instead of after them; its problems are reported after theirs.
  std::unique_ptr<format::Reader> reader;
  std::string layout_problem;
  try {
    // Held to the end: a fold waits for verify instead of changing chunks under it.
    reader = format::Reader::Open(path, format::OpenOptions{true, true, format::ReadLock::kHold});
  } catch (const Error& e) {
    if (e.code() != Code::kCorrupt) throw;
    layout_problem = e.what();
  }
  // The journal scan, which needs the layout, runs on one of the checksum threads before it
  // takes chunks, so the sequential scan and the parallel chunks share the cores.
  format::JournalState js;
  std::function<void()> scan_journal;
  if (reader)
    scan_journal = [&path, &h, &reader, len, &js] {
      base::UniqueFd jfd = base::OpenFile(path, O_RDONLY);
      ::posix_fadvise(jfd.get(), static_cast<off_t>(h.file_size), 0, POSIX_FADV_SEQUENTIAL);
      js = format::ReadJournal(jfd.get(), path, h, reader->layout(), len, /*keep_entries=*/false);
    };
  StatsCheck stats;
  RowsCheck rows_check;
  std::vector<std::pair<uint64_t, uint64_t>> suspect_rows;
  if (reader) {
    const format::Layout& l = reader->layout();
    const format::SectionEntry* rows = reader->FindSection(format::SectionType::kRows);
    const format::SectionEntry* scales = reader->FindSection(format::SectionType::kScales);
    const uint64_t scale_bytes = l.total_rows * l.scale_stride();
    if (rows && l.row_dim && rows->size == l.total_rows * l.row_stride() &&
        (scale_bytes == 0 || (scales && scales->size == scale_bytes)))
      rows_check.layout = &l;
  }
  CheckChunks(h, fd.get(), map.data(), path, o.threads > 0 ? o.threads : omp_get_max_threads(),
              &rep, &stats, rows_check, &suspect_rows, scan_journal, reporter);
  rep.checksum_seconds = sw.Seconds();
  if (!layout_problem.empty()) Add(&rep, 0, 0, "layout", Code::kCorrupt, layout_problem);
  if (reader) {
    const format::Layout& l = reader->layout();
    // Stats plausibility: an owner's count never exceeds its bucket's total.
    if (stats.bad)
      Add(&rep,
          reader->FindSection(format::SectionType::kStats)->offset +
              stats.first * format::kStatsRowSize,
          format::kStatsRowSize, "section STATS", Code::kCorrupt,
          std::to_string(stats.bad) + " rows have inconsistent statistics (first: row " +
              std::to_string(stats.first) + ")");
    if (!suspect_rows.empty()) ReportNonFiniteRows(*reader, suspect_rows, &rep);
    // The ledger's folded facts must decode (their bytes passed their checksums at open).
    try {
      reader->Facts();
    } catch (const Error& e) {
      const format::SectionEntry* s = reader->FindSection(format::SectionType::kFacts);
      Add(&rep, s ? s->offset : 0, s ? s->size : 0, "section FACTS", Code::kCorrupt, e.what());
    }
    for (const format::NonFiniteRecord& e : js.non_finite)
      Add(&rep, e.offset, 0, "journal", Code::kCorrupt,
          "the journal record at offset " + std::to_string(e.offset) + " (layer " +
              std::to_string(l.spec.layer_ids[e.layer_index]) + ", order " +
              std::to_string(e.order) + ", head " + std::to_string(e.head) + ", bucket " +
              std::to_string(e.bucket) + ") holds a non-finite value (Inf or NaN) at index " +
              std::to_string(e.index) + "; append it again with a finite value and fold");
    rep.journal_entries = js.n_committed;
    if (js.n_committed > 0)
      rep.notes.push_back("journal: " + std::to_string(js.n_committed) + " committed entries in " +
                          std::to_string(js.n_commits) +
                          " commits, not yet folded (engramctl sort-buckets folds them)");
    if (!js.damage.empty()) {
      Add(&rep, js.damage_offset, len - std::min(len, js.damage_offset), "journal", Code::kCorrupt,
          js.damage);
    } else if (js.tail_bytes() > 0) {
      rep.notes.push_back("journal: an uncommitted tail of " + std::to_string(js.tail_bytes()) +
                          " bytes (" + js.tail_reason +
                          ") is ignored and will be overwritten by the next append");
    }
    if (o.config) CheckConfig(*reader, o, js.n_committed > 0, &rep);
    uint64_t need = HostMemoryNeeded(len, o.page_cache_margin);
    uint64_t avail = base::AvailableMemoryBytes();
    if (avail && need > avail) {
      std::string msg =
          "the table is " + base::FormatGB(static_cast<double>(len)) + " and needs about " +
          base::FormatGB(static_cast<double>(need)) +
          " of host memory with page-cache overhead, but only " +
          base::FormatGB(static_cast<double>(avail)) +
          " is available here; free memory or serve it from a larger host (it is never loaded into "
          "device memory instead)";
      if (o.config)
        Add(&rep, 0, 0, "host memory", Code::kConfig, msg);
      else
        rep.notes.push_back(msg);
    }
  }
  rep.seconds = sw.Seconds();
  return rep;
}

std::string VerifyReport::ToJson() const {
  std::string j = "{\"path\":" + base::JsonString(path) + ",\"ok\":" + (ok() ? "true" : "false") +
                  ",\"bytes_checksummed\":" + std::to_string(bytes_checksummed) +
                  ",\"chunks_checked\":" + std::to_string(chunks_checked) +
                  ",\"journal_entries\":" + std::to_string(journal_entries) + ",\"seconds\":";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds);
  j += buf;
  std::snprintf(buf, sizeof buf, "%.3f", checksum_seconds);
  j += ",\"checksum_seconds\":" + std::string(buf);
  j += ",\"problems\":[";
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    j += (i ? "," : "") + std::string("{\"offset\":") + std::to_string(p.offset) +
         ",\"length\":" + std::to_string(p.length) + ",\"field\":" + base::JsonString(p.field) +
         ",\"code\":" + base::JsonString(CodeName(p.code)) +
         ",\"message\":" + base::JsonString(p.message) + "}";
  }
  j += "],\"notes\":[";
  for (size_t i = 0; i < notes.size(); ++i) j += (i ? "," : "") + base::JsonString(notes[i]);
  j += "]}";
  return j;
}

std::string VerifyReport::ToText() const {
  std::ostringstream os;
  for (const Problem& p : problems) os << "problem: " << p.field << ": " << p.message << "\n";
  for (const std::string& n : notes) os << "note: " << n << "\n";
  const double t = checksum_seconds > 0 ? checksum_seconds : seconds;
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.2f GB/s",
                t > 0 ? static_cast<double>(bytes_checksummed) / t / 1e9 : 0.0);
  if (ok())
    os << path << ": OK, safe to deploy (" << chunks_checked << " chunks, "
       << base::FormatBytes(bytes_checksummed) << " checksummed in " << base::FormatSeconds(t)
       << ", " << rate << ")\n";
  else
    os << path << ": " << problems.size() << " problem(s) found; do not deploy\n";
  return os.str();
}

}  // namespace engram::table

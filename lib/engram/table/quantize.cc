// Converts a table's rows to another dtype: decode each row to f32 (through the journal), encode
// it in the target dtype, a block of rows per thread at a time, unmapping what was read and
// written.
#include "engram/table/quantize.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/interrupt.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/format/writer.h"
#include "engram/table/fold.h"

namespace engram::table {

using format::SectionType;

double RowError::rel_l2() const noexcept { return sq_norm > 0 ? std::sqrt(sq_err / sq_norm) : 0; }

void RowError::Add(const RowError& o) noexcept {
  rows += o.rows;
  sq_err += o.sq_err;
  sq_norm += o.sq_norm;
  max_abs = std::max(max_abs, o.max_abs);
}

namespace {

void AddRow(std::span<const float> src, std::span<const float> out, RowError* e) {
  // A row's sums in float (vectorized; a row is at most 65,536 values), rows summed in double.
  float err = 0, norm = 0, mx = 0;
  const float *a = src.data(), *b = out.data();
  const size_t n = src.size();
#pragma omp simd reduction(+ : err, norm) reduction(max : mx)
  for (size_t i = 0; i < n; ++i) {
    const float d = b[i] - a[i];
    err += d * d;
    norm += a[i] * a[i];
    mx = std::max(mx, std::fabs(d));
  }
  e->rows++;
  e->sq_err += err;
  e->sq_norm += norm;
  e->max_abs = std::max(e->max_abs, static_cast<double>(mx));
}

std::string QuantizedProvenance(const std::string& old, base::DType from, base::DType to,
                                uint64_t journal_entries) {
  return format::AddProvenanceStep(
      old, "quantized",
      {{"from", base::Json::MakeString(std::string(base::DTypeName(from)))},
       {"to", base::Json::MakeString(std::string(base::DTypeName(to)))},
       {"journal_entries_folded", base::Json::MakeNumber(static_cast<int64_t>(journal_entries))}});
}

}  // namespace

QuantizeResult Quantize(const QuantizeOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  QuantizeResult res;
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  ENGRAM_CHECK(!o.output.empty(), Code::kInvalidArgument, "quantize needs -o OUT, a new file");
  {
    struct stat a, b;
    ENGRAM_CHECK(!(::stat(o.input.c_str(), &a) == 0 && ::stat(o.output.c_str(), &b) == 0 &&
                   a.st_dev == b.st_dev && a.st_ino == b.st_ino),
                 Code::kInvalidArgument,
                 "-o " << o.output
                       << " is the input table; quantize writes a new file (convert "
                          "to another path, check it, then move it over the old one)");
  }
  format::ViewOptions vo;
  vo.deterministic_addressing = false;     // the journal is read and folded into the output
  vo.open.lock = format::ReadLock::kHold;  // no fold changes rows while they are converted
  auto view = format::TableView::Open(o.input, vo);
  const format::Reader& r = view->reader();
  const format::Layout& src = view->layout();
  res.from = src.dtype;
  res.to = o.dtype;
  res.rows = src.total_rows;
  res.input_bytes = r.file_length();
  res.journal_entries = view->journal().committed.size();
  ENGRAM_CHECK(src.dtype != o.dtype || res.journal_entries > 0, Code::kInvalidArgument,
               o.input << " already stores " << base::DTypeName(o.dtype)
                       << " rows; choose another --dtype (or copy the file)");
  format::Layout dst = src;
  dst.dtype = o.dtype;
  format::WriterOptions wo;
  wo.chunk_log2 = r.header().chunk_log2;
  wo.with_stats = r.has_stats();
  wo.sketch_owners = (r.header().optional_flags & format::kOptSketchOwners) != 0;
  wo.threads = threads;
  format::TableWriter w(o.output, dst, wo);

  // Rows: blocks of rows, each decoded (journal first), re-encoded, measured, and unmapped.
  const uint32_t D = src.row_dim;
  const uint64_t n_rows = src.total_rows, block = 4096;
  const int64_t n_blocks = static_cast<int64_t>((n_rows + block - 1) / block);
  const float limit = base::MaxFinite(o.dtype);
  std::vector<RowError> errors(threads);
  std::atomic<uint64_t> bad_row{UINT64_MAX}, done{0};
  std::atomic<bool> stop{false};
  const uint64_t in_stride = src.row_stride(), in_sstride = src.scale_stride(),
                 out_stride = dst.row_stride(), out_sstride = dst.scale_stride();
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> x(D), y(D);
    RowError& err = errors[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < n_blocks; ++b) {
      if (stop.load(std::memory_order_relaxed)) continue;
      if (base::PendingInterrupt()) {
        stop = true;
        continue;
      }
      const uint64_t r0 = static_cast<uint64_t>(b) * block, r1 = std::min(n_rows, r0 + block);
      for (uint64_t row = r0; row < r1; ++row) {
        view->DecodeRowTo(row, x);
        // Non-finite values (Inf, NaN) and values past the target's range, in one pass: NaN
        // compares false, so it is counted apart.
        float amax = 0;
        int nan = 0;
        const float* xv = x.data();
#pragma omp simd reduction(max : amax) reduction(+ : nan)
        for (uint32_t i = 0; i < D; ++i) {
          amax = std::max(amax, std::fabs(xv[i]));
          nan += xv[i] != xv[i];
        }
        const bool finite = nan == 0 && amax <= std::numeric_limits<float>::max();
        if (!finite || amax > limit) {
          uint64_t cur = bad_row.load();
          while (row < cur && !bad_row.compare_exchange_weak(cur, row)) {
          }
          stop = true;
          break;
        }
        uint8_t* out = w.rows() + row * out_stride;
        uint8_t* sc = out_sstride ? w.scales() + row * out_sstride : nullptr;
        base::EncodeRow(o.dtype, x, out, sc);
        base::DecodeRow(o.dtype, out, sc, y);
        AddRow(x, y, &err);
      }
      base::ReleaseMappedPages(r.RowBytes(r0), (r1 - r0) * in_stride);
      if (in_sstride) base::ReleaseMappedPages(r.ScaleBytes(r0), (r1 - r0) * in_sstride);
      base::ReleaseMappedPages(w.rows() + r0 * out_stride, (r1 - r0) * out_stride);
      if (out_sstride)
        base::ReleaseMappedPages(w.scales() + r0 * out_sstride, (r1 - r0) * out_sstride);
      const uint64_t d = done.fetch_add(r1 - r0) + (r1 - r0);
      if (omp_get_thread_num() == 0) reporter.Progress("quantize", d, n_rows, "rows");
    }
  }
  base::ThrowIfInterrupted();
  if (bad_row.load() != UINT64_MAX) {
    const uint64_t row = bad_row.load();
    std::vector<float> x(D);
    view->DecodeRowTo(row, x);
    float amax = 0;
    bool finite = true;
    for (float v : x) {
      finite &= std::isfinite(v);
      amax = std::max(amax, std::fabs(v));
    }
    ENGRAM_CHECK(finite, Code::kInvalidArgument,
                 o.input << ": row " << row << " holds a non-finite value (Inf or NaN); run "
                         << "'engramctl verify " << o.input << "' and repair the table first");
    ENGRAM_THROW(Code::kInvalidArgument,
                 o.input << ": row " << row << " holds a value of magnitude " << amax << ", more "
                         << "than " << base::DTypeName(o.dtype) << " can hold (" << limit
                         << "); choose a wider dtype (bf16, fp8-e4m3 or int8 keep any f32 range)");
  }
  reporter.ProgressDone("quantize");
  for (const RowError& e : errors) res.error.Add(e);

  // Owners and statistics as they are; rows the journal overwrote get its tags, and their hit
  // counts restart (as a fold does).
  ParallelCopy(reinterpret_cast<uint8_t*>(w.tags()), r.Section(SectionType::kTags).data(),
               n_rows * 4, threads);
  if (w.stats())
    ParallelCopy(w.stats(), r.Section(SectionType::kStats).data(), n_rows * format::kStatsRowSize,
                 threads);
  for (const auto& [row, idx] : view->journal().overlay) {
    w.tags()[row] = view->journal().committed[idx].tag;
    if (w.stats()) base::StoreLE<uint32_t>(w.stats() + row * format::kStatsRowSize, 0);
  }
  const std::vector<format::Fact> ledger = view->Ledger();
  w.SetFacts(ledger);
  res.facts = ledger.size();
  w.SetProvenance(QuantizedProvenance(r.provenance(), src.dtype, o.dtype, res.journal_entries));
  base::ThrowIfInterrupted();
  w.Commit(reporter);
  struct stat st;
  res.output_bytes = ::stat(o.output.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  res.seconds = sw.Seconds();
  return res;
}

RowError CompareRows(const format::TableView& source, const format::TableView& converted,
                     std::span<const uint64_t> rows) {
  std::vector<uint64_t> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const uint32_t D = source.layout().row_dim;
  std::vector<float> x(D), y(D);
  RowError e;
  for (uint64_t row : sorted) {
    if (row >= source.layout().total_rows) continue;
    source.DecodeRowTo(row, x);
    converted.DecodeRowTo(row, y);
    AddRow(x, y, &e);
  }
  return e;
}

}  // namespace engram::table

// Fold: parallel sort of journal entries by (row, seq), copy of the base, rows applied in
// bucket order, a new header and checksums, rename.
#include "engram/table/fold.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <parallel/algorithm>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/format/view.h"
#include "engram/format/writer.h"
#include "engram/format/writer_lock.h"

namespace engram::table {

namespace {

void ParallelCopy(uint8_t* dst, const uint8_t* src, uint64_t n, int threads) {
  const uint64_t block = 64ull << 20;
  const int64_t blocks = static_cast<int64_t>((n + block - 1) / block);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t at = static_cast<uint64_t>(b) * block;
    std::memcpy(dst + at, src + at, std::min(block, n - at));
  }
}

std::string FoldedProvenance(const std::string& old, uint64_t entries) {
  base::Json j;
  try {
    j = base::Json::Parse(old, "provenance", 32);
  } catch (const Error&) {
  }
  if (!j.is_object()) j = base::Json::MakeObject({{"previous", base::Json::MakeString(old)}});
  std::vector<base::Json> folds;
  if (const base::Json* f = j.Find("folded"); f && f->is_array()) folds = f->items();
  folds.push_back(base::Json::MakeObject(
      {{"entries", base::Json::MakeNumber(static_cast<int64_t>(entries))},
       {"unix", base::Json::MakeNumber(static_cast<int64_t>(base::UnixNow()))}}));
  if (folds.size() > 100) folds.erase(folds.begin(), folds.end() - 100);  // PROVENANCE stays small
  j.Set("folded", base::Json::MakeArray(std::move(folds)));
  return j.Dump();
}

}  // namespace

FoldResult SortBuckets(const FoldOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  FoldResult res;
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
  format::WriterLock lock(table, o.wait, "sort-buckets", /*read_only=*/!o.output.empty(),
                          &reporter);
  format::RemoveStaleTempFiles(out);
  format::ViewOptions vo;
  vo.deterministic_addressing = false;
  auto view = format::TableView::Open(table, vo);
  const format::JournalState& js = view->journal();
  res.entries = js.committed.size();
  // A table without the ledger flag (format 3.0/3.1) is rewritten, even with an empty journal:
  // the new base is format 3.2 and can record the facts of append --fit.
  const bool upgrade = !(view->reader().header().required_flags & format::kReqLedger);
  if (js.committed.empty() && js.facts.empty() && o.output.empty() && js.tail_bytes() == 0 &&
      !upgrade) {
    res.nothing_to_do = true;
    res.seconds = sw.Seconds();
    return res;
  }
  // Bucket order: sort (row, seq) pairs in parallel; the last entry per row wins.
  std::vector<std::pair<uint64_t, uint32_t>> order(js.committed.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = {js.committed[i].row, static_cast<uint32_t>(i)};
  __gnu_parallel::sort(order.begin(), order.end(), __gnu_parallel::default_parallel_tag(threads));
  std::vector<uint32_t> winners;
  for (size_t i = 0; i < order.size(); ++i)
    if (i + 1 == order.size() || order[i + 1].first != order[i].first)
      winners.push_back(order[i].second);
  res.rows = winners.size();

  const format::Reader& r = view->reader();
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
  ParallelCopy(reinterpret_cast<uint8_t*>(w.tags()), r.Section(format::SectionType::kTags).data(),
               l.total_rows * 4, threads);
  if (w.stats())
    ParallelCopy(w.stats(), r.Section(format::SectionType::kStats).data(),
                 l.total_rows * format::kStatsRowSize, threads);
  reporter.Progress("fold", 2, 4, "steps");
  for (uint32_t idx : winners) {
    const format::JournalEntry& e = js.committed[idx];
    std::memcpy(w.rows() + e.row * l.row_stride(), e.value.data(), l.row_stride());
    if (l.scale_stride())
      std::memcpy(w.scales() + e.row * l.scale_stride(), e.value.data() + l.row_stride(),
                  l.scale_stride());
    w.tags()[e.row] = e.tag;
    // owner_count 0 marks an owner set by append (it has no corpus count); totals stay.
    if (w.stats()) base::StoreLE<uint32_t>(w.stats() + e.row * format::kStatsRowSize, 0);
  }
  const std::vector<format::Fact> ledger = view->Ledger();
  w.SetFacts(ledger);  // folded facts stay in the ledger (FACTS, §3.7)
  res.facts = ledger.size();
  res.upgraded = upgrade;
  w.SetProvenance(FoldedProvenance(r.provenance(), res.entries));
  reporter.Progress("fold", 3, 4, "steps");
  w.Commit(reporter);
  reporter.ProgressDone("fold");
  res.seconds = sw.Seconds();
  return res;
}

}  // namespace engram::table

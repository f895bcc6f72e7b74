// ExactCounter: per-thread hash counters in shares, sorted zstd spill runs, their merge into
// owners or into a part stream.
#include "engram/builder/exact_counter.h"

#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/memory.h"
#include "engram/base/units.h"
#include "engram/builder/ngram_counter.h"
#include "engram/builder/owner_cells.h"
#include "engram/builder/zstd_stream.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

namespace {

// The thread share an n-gram with slot hash h belongs to: its high 32 bits scaled to [0, shares).
inline int ShareOf(uint64_t h, int shares) noexcept {
  return static_cast<int>(((h >> 32) * static_cast<uint64_t>(shares)) >> 32);
}

}  // namespace

uint64_t DefaultBuildMemory() {
  uint64_t avail = base::AvailableMemoryBytes();
  return std::clamp<uint64_t>(avail / 4, 256ull << 20, 8ull << 30);
}

void RemoveStaleSpills(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = "engram-build.";
  while (dirent* e = ::readdir(d)) {
    std::string f = e->d_name;
    if (f.compare(0, prefix.size(), prefix) != 0) continue;
    long pid = std::strtol(f.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ::unlink((dir + "/" + f).c_str());
  }
  ::closedir(d);
}

// Bytes handed to the compressor at a time when writing a run.
constexpr size_t kSpillWriteBytes = size_t{1} << 20;

// Additions between budget checks: a counter gains at most this many n-grams in between.
constexpr uint64_t kSpillCheckEvery = 4096;

struct ExactCounter::ThreadState {
  int share = 0;  // which n-grams it counts (ShareOf)
  std::vector<NgramCounter> counters;
  uint64_t since_check = 0;
  uint64_t Memory() const {
    uint64_t m = 0;
    for (const auto& c : counters) m += c.memory_bytes();
    return m;
  }
  // True when a counter may grow before the next check (within `adds` additions) and its
  // growth would cross the budget: a counter doubles in place, adding its own size.
  bool MustSpill(uint64_t adds, uint64_t budget) const {
    const uint64_t m = Memory();
    for (const auto& c : counters)
      if (c.headroom() <= adds && m + c.memory_bytes() > budget) return true;
    return false;
  }
};

ExactCounter::ExactCounter(const hash::AddressSpec& spec, uint64_t memory_bytes,
                           std::string temp_dir, int threads, base::Reporter& reporter)
    : spec_(spec), temp_dir_(std::move(temp_dir)), reporter_(reporter), mu_(new std::mutex) {
  budget_per_thread_ = std::max<uint64_t>(memory_bytes / std::max(threads, 1), 16ull << 20);
  for (int t = 0; t < threads; ++t) {
    auto s = std::make_unique<ThreadState>();
    s->share = t;
    for (uint32_t n = hash::kMinOrder; n <= spec.max_order; ++n)
      s->counters.emplace_back(n, 1 << 14);
    threads_.push_back(std::move(s));
  }
  RemoveStaleSpills(temp_dir_);
}

ExactCounter::~ExactCounter() {
  for (const auto& r : runs_) ::unlink(r.path.c_str());
  delete mu_;
}

void ExactCounter::AddBlock(const TokenBlock& b, int thread) {
  ThreadState& t = *threads_[thread];
  const int shares = static_cast<int>(threads_.size());
  ForEachNgram(spec_, b, [&](uint32_t n, const uint32_t* ids) {
    const uint64_t h = NgramCounter::Hash(ids, n);
    if (shares > 1 && ShareOf(h, shares) != t.share) return;
    t.counters[n - hash::kMinOrder].Push(ids, h);
    // A counter grows by doubling: spill before the next growth could cross the budget. Spilled
    // counters keep their capacity, so the test is on growth, not on the memory held: testing
    // the memory held spilled again every check once the first spill had happened.
    if (++t.since_check >= kSpillCheckEvery) {
      t.since_check = 0;
      if (t.MustSpill(kSpillCheckEvery + NgramCounter::kBatch, budget_per_thread_)) Spill(t);
    }
  });
  for (auto& c : t.counters) c.Drain();
}

void ExactCounter::Spill(ThreadState& t) {
  for (auto& c : t.counters) c.Drain();
  for (auto& c : t.counters) {
    if (c.size() == 0) continue;
    const uint32_t n = c.order();
    const size_t records = c.size();
    // Sorted in place: the records are the run's bytes, written as they lie.
    const uint32_t* rec = c.SortRecords();
    std::string path;
    {
      std::lock_guard<std::mutex> lock(*mu_);
      path = temp_dir_ + "/engram-build." + std::to_string(::getpid()) + "." +
             std::to_string(run_seq_++) + ".run";
      runs_.push_back({n, t.share, path});
    }
    ZstdWriter w(path, 1);
    const size_t bytes = records * (n + 2) * 4;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(rec);
    for (size_t off = 0; off < bytes; off += kSpillWriteBytes)
      w.Write(p + off, std::min(kSpillWriteBytes, bytes - off));
    w.Close(false);
    {
      std::lock_guard<std::mutex> lock(*mu_);
      spilled_bytes_ += w.compressed_bytes();
      spilled_records_ += records;
    }
    c.Clear();
  }
}

uint64_t ExactCounter::records() const {
  uint64_t r = spilled_records_;
  for (const auto& t : threads_)
    for (const auto& c : t->counters) r += c.size();
  return r;
}

void ExactCounter::Merge(const std::function<void(uint32_t order)>& begin_order,
                         const RecordSink& sink) {
  // Every in-memory counter sorts its records in place, all at once in parallel.
  const size_t orders = spec_.max_order - hash::kMinOrder + 1;
  // Counter i is thread i / orders's counter of order kMinOrder + i % orders.
  auto CounterAt = [&](size_t i) -> NgramCounter& {
    return threads_[i / orders]->counters[i % orders];
  };
  const int64_t counters = static_cast<int64_t>(threads_.size() * orders);
  std::vector<const uint32_t*> sorted(counters, nullptr);
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(threads_.size()))
  for (int64_t i = 0; i < counters; ++i) {
    NgramCounter& c = CounterAt(static_cast<size_t>(i));
    if (c.size()) sorted[i] = c.SortRecords();
  }
  for (uint32_t n = hash::kMinOrder; n <= spec_.max_order; ++n) {
    begin_order(n);
    std::vector<std::unique_ptr<Source>> sources;
    for (const Run& r : runs_)
      if (r.order == n) sources.push_back(std::make_unique<RunSource>(r.path, n));
    for (size_t t = 0; t < threads_.size(); ++t) {
      const size_t i = t * orders + (n - hash::kMinOrder);
      if (sorted[i])
        sources.push_back(std::make_unique<MemSource>(sorted[i], CounterAt(i).size(), n));
    }
    KWayMerge(sources, n, sink);
  }
}

void MergePartStreams(const std::vector<ZstdReader*>& readers, uint32_t order,
                      const RecordSink& sink) {
  std::vector<std::unique_ptr<Source>> sources;
  for (ZstdReader* r : readers) sources.push_back(std::make_unique<PartSource>(r, order));
  KWayMerge(sources, order, sink);
}

namespace {

// Writes a part body: the (ids, count) records of one order after another, each order ended by
// a record of zeros (count 0), in 1 MiB writes.
class PartBodyWriter {
 public:
  explicit PartBodyWriter(ZstdWriter& w) : w_(w) {}
  void BeginOrder(uint32_t n) {
    EndOrder();
    order_ = n;
  }
  void Add(const uint32_t* ids, uint64_t count) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(ids);
    buf_.insert(buf_.end(), p, p + order_ * 4);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(&count);
    buf_.insert(buf_.end(), c, c + 8);
    if (buf_.size() >= (1 << 20)) Flush();
  }
  void EndOrder() {
    if (!order_) return;
    buf_.insert(buf_.end(), order_ * 4 + 8, 0);
    Flush();
    order_ = 0;
  }

 private:
  void Flush() {
    w_.Write(buf_.data(), buf_.size());
    buf_.clear();
  }
  ZstdWriter& w_;
  std::vector<uint8_t> buf_;
  uint32_t order_ = 0;
};

}  // namespace

void ExactCounter::WriteMerged(ZstdWriter& w) {
  PartBodyWriter body(w);
  Merge([&](uint32_t n) { body.BeginOrder(n); },
        [&](const uint32_t* ids, uint64_t count) { body.Add(ids, count); });
  body.EndOrder();
}

void WriteMergedPartStreams(const std::vector<ZstdReader*>& readers, uint32_t max_order,
                            ZstdWriter& w) {
  PartBodyWriter body(w);
  for (uint32_t n = hash::kMinOrder; n <= max_order; ++n) {
    body.BeginOrder(n);
    MergePartStreams(readers, n,
                     [&](const uint32_t* ids, uint64_t count) { body.Add(ids, count); });
  }
  body.EndOrder();
}

uint64_t ExactCounter::AssignOwners(const format::Layout& l, OwnerArrays* oa, uint64_t cell_budget,
                                    const std::function<void(uint64_t, uint64_t)>& progress) {
  const hash::AddressSpec& s = l.spec;
  const std::vector<OwnerPass> passes = PlanOwnerPasses(l, cell_budget);
  const int64_t shares = static_cast<int64_t>(threads_.size());
  const size_t jobs = s.n_layers() * s.n_heads;
  // Progress counts the records each pass merges: every record once per pass with its order.
  uint64_t order_passes = 0;
  for (const OwnerPass& p : passes)
    for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) order_passes += p.HasOrder(l, n);
  const uint64_t total = records() * order_passes / (s.max_order - hash::kMinOrder + 1);
  // Shares meet in the rows: one lock per sub-table, and each share starts at a different one.
  std::vector<std::mutex> locks(s.n_subtables());
  std::atomic<uint64_t> done{0}, distinct{0};
  // Sorting an in-memory counter compacts it, so it is sorted once, for every pass that merges it
  // with spill runs.
  std::vector<std::vector<const uint32_t*>> sorted(
      static_cast<size_t>(shares), std::vector<const uint32_t*>(s.max_order + 1, nullptr));
  // Owners are chosen in packed row states (one cache line a row, not two), a pass's rows at a
  // time, then copied out.
  uint64_t max_rows = 0;
  for (const OwnerPass& p : passes) max_rows = std::max(max_rows, p.end_row - p.first_row);
  base::ZeroedBuffer state_buf(max_rows * sizeof(RowState));
  const TableCells table{oa};
  for (const OwnerPass& pass : passes) {
    const StateCells cells{static_cast<RowState*>(state_buf.data()), pass.first_row};
    std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(shares))
    for (int64_t t = 0; t < shares; ++t) {
      try {
        std::vector<uint32_t> ids;
        std::vector<uint64_t> counts(kAssignChunk);
        std::vector<uint32_t> tags(kAssignChunk);
        size_t m = 0;
        for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) {
          if (!pass.HasOrder(l, n)) continue;
          ids.resize(kAssignChunk * n);
          NgramCounter& c = threads_[t]->counters[n - hash::kMinOrder];
          std::vector<std::unique_ptr<Source>> sources;
          for (const Run& r : runs_)
            if (r.order == n && r.share == t)
              sources.push_back(std::make_unique<RunSource>(r.path, n));
          const bool direct = sources.empty();  // the counter alone: complete, read unsorted
          auto report = [&](uint64_t consumed) {
            const uint64_t d = done += consumed;
            if (t == 0 && progress) progress(std::min(d, total), total);
          };
          auto flush = [&] {
            if (m == 0) return;
            for (size_t k = 0; k < m; ++k)
              tags[k] = hash::OwnerTag(&ids[k * n], n, l.owner_tag_seed);
            for (size_t j = 0; j < jobs; ++j) {
              const size_t job = (j + static_cast<size_t>(t) * jobs / shares) % jobs;
              const size_t li = job / s.n_heads;
              const uint32_t h = static_cast<uint32_t>(job % s.n_heads);
              const size_t sub = s.SubIndex(li, n, h);
              if (!pass.Has(sub)) continue;
              std::lock_guard<std::mutex> lock(locks[sub]);
              ApplyToSubTable(l, cells, li, h, n, ids.data(), counts.data(), tags.data(),
                              static_cast<int64_t>(m));
            }
            if (pass.CountsOrder(l, n)) distinct += m;
            if (direct) report(m);
            m = 0;
          };
          auto add = [&](const uint32_t* r, uint64_t count) {
            std::memcpy(&ids[m * n], r, n * 4);
            counts[m] = count;
            if (++m == kAssignChunk) flush();
          };
          if (direct) {
            c.ForEach(add);
          } else {
            if (c.size()) {
              const uint32_t*& recs = sorted[t][n];
              if (!recs) recs = c.SortRecords();
              sources.push_back(std::make_unique<MemSource>(recs, c.size(), n));
            }
            KWayMerge(sources, n, add, report);
          }
          flush();
        }
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    // Copied out in order, a block at a time; each block's state and table pages are given back
    // as it is done (the page cache keeps the table's), so resident memory stays within the pass.
    constexpr uint64_t kBlock = uint64_t{1} << 16;
    const auto blocks = static_cast<int64_t>((pass.end_row - pass.first_row + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(shares))
    for (int64_t b = 0; b < blocks; ++b) {
      const uint64_t r0 = pass.first_row + static_cast<uint64_t>(b) * kBlock;
      const uint64_t r1 = std::min(pass.end_row, r0 + kBlock);
      for (uint64_t r = r0; r < r1; ++r) table.Store(r, cells.rows[r - pass.first_row]);
      table.Release(r0, r1);
      state_buf.ZeroRange((r0 - pass.first_row) * sizeof(RowState), (r1 - r0) * sizeof(RowState));
    }
  }
  return distinct;
}

}  // namespace engram::builder

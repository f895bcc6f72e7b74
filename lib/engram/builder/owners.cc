// Exact counting with spills, k-way merge, chunked owner assignment, and the sketch mode.
#include "engram/builder/owners.h"

#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <queue>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/memory.h"
#include "engram/base/units.h"
#include "engram/builder/build.h"
#include "engram/builder/ngram_counter.h"
#include "engram/builder/zstd_stream.h"
#include "engram/format/format.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

namespace {

inline uint32_t Sat32(uint64_t v) {
  return v > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<uint32_t>(v);
}

// Numeric lexicographic order of n ids: the order of every run and shard summary.
inline int CompareIds(const uint32_t* a, const uint32_t* b, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

// The thread share an n-gram with slot hash h belongs to: its high 32 bits scaled to [0, shares).
inline int ShareOf(uint64_t h, int shares) noexcept {
  return static_cast<int>(((h >> 32) * static_cast<uint64_t>(shares)) >> 32);
}

// Feeds a block's n-grams (orders 2..N) to f(order, ids), with the block's context as history.
template <typename F>
void ForEachNgram(const hash::AddressSpec& spec, const TokenBlock& b, F&& f) {
  const uint32_t N = spec.max_order;
  uint32_t w[hash::kMaxOrder];
  std::fill(w, w + N, spec.pad_id);
  size_t c = b.context.size();
  for (size_t i = 0; i < c; ++i) w[N - c + i] = b.context[i];
  for (uint32_t id : b.ids) {
    if (id == kDocSeparator) {
      std::fill(w, w + N, spec.pad_id);
      continue;
    }
    std::memmove(w, w + 1, (N - 1) * 4);
    w[N - 1] = id;
    for (uint32_t n = hash::kMinOrder; n <= N; ++n) f(n, w + N - n);
  }
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

namespace {

// A sorted source of records of one order.
class Source {
 public:
  virtual ~Source() = default;
  // Loads the next record into ids/count; false at the end.
  virtual bool Next() = 0;
  const uint32_t* ids() const { return ids_.data(); }
  uint64_t count() const { return count_; }

 protected:
  std::vector<uint32_t> ids_;
  uint64_t count_ = 0;
};

class RunSource final : public Source {
 public:
  RunSource(const std::string& path, uint32_t n) : r_(path), n_(n), rec_(n * 4 + 8) {
    ids_.resize(n);
  }
  bool Next() override {
    size_t got = r_.Read(rec_.data(), rec_.size());
    if (got == 0) return false;
    ENGRAM_CHECK(got == rec_.size(), Code::kCorrupt, r_.path() << ": truncated record");
    std::memcpy(ids_.data(), rec_.data(), n_ * 4);
    std::memcpy(&count_, rec_.data() + n_ * 4, 8);
    return true;
  }

 private:
  ZstdReader r_;
  uint32_t n_;
  std::vector<uint8_t> rec_;
};

// Records of one order from a part stream, up to its terminator (count 0).
class PartSource final : public Source {
 public:
  PartSource(ZstdReader* r, uint32_t n) : r_(r), n_(n), rec_(n * 4 + 8) { ids_.resize(n); }
  bool Next() override {
    if (done_) return false;
    r_->ReadExact(rec_.data(), rec_.size());
    std::memcpy(ids_.data(), rec_.data(), n_ * 4);
    std::memcpy(&count_, rec_.data() + n_ * 4, 8);
    if (count_ == 0) done_ = true;
    return !done_;
  }

 private:
  ZstdReader* r_;
  uint32_t n_;
  std::vector<uint8_t> rec_;
  bool done_ = false;
};

// The sorted records of an in-memory counter (NgramCounter::SortRecords already called).
class MemSource final : public Source {
 public:
  MemSource(const uint32_t* records, size_t count, uint32_t n) : p_(records), left_(count), n_(n) {
    ids_.resize(n);
  }
  bool Next() override {
    if (left_ == 0) return false;
    std::memcpy(ids_.data(), p_, n_ * 4);
    std::memcpy(&count_, p_ + n_, 8);
    p_ += n_ + 2;
    --left_;
    return true;
  }

 private:
  const uint32_t* p_;
  size_t left_;
  uint32_t n_;
};

// Calls on_consumed(k) after every k input records (k = kMergeProgressEvery) and once at the end.
constexpr uint64_t kMergeProgressEvery = 1 << 20;

void KWayMerge(std::vector<std::unique_ptr<Source>>& sources, uint32_t n, const RecordSink& sink,
               const std::function<void(uint64_t)>& on_consumed = {}) {
  uint64_t consumed = 0;
  auto greater = [&](size_t a, size_t b) {
    return CompareIds(sources[a]->ids(), sources[b]->ids(), n) > 0;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(greater)> heap(greater);
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i]->Next()) heap.push(i);
  std::vector<uint32_t> cur(n);
  while (!heap.empty()) {
    size_t i = heap.top();
    heap.pop();
    std::memcpy(cur.data(), sources[i]->ids(), n * 4);
    uint64_t total = sources[i]->count();
    if (sources[i]->Next()) heap.push(i);
    ++consumed;
    while (!heap.empty() && CompareIds(sources[heap.top()]->ids(), cur.data(), n) == 0) {
      size_t j = heap.top();
      heap.pop();
      total += sources[j]->count();
      if (sources[j]->Next()) heap.push(j);
      ++consumed;
    }
    sink(cur.data(), total);
    if (consumed >= kMergeProgressEvery && on_consumed) {
      on_consumed(consumed);
      consumed = 0;
    }
  }
  if (consumed && on_consumed) on_consumed(consumed);
}

}  // namespace

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

// Records the assigner buffers before applying them in parallel.
constexpr size_t kAssignChunk = size_t{1} << 20;

namespace {

// A row's owner cells: its owner's tag and count, and (STATS) the occurrences and distinct
// n-grams of the row.
struct RowState {
  uint32_t tag, owner_count, total, distinct;
};

// The owner rule (§6): the n-gram with the highest count owns the row, ties to the smaller tag;
// occurrences and distinct n-grams add up (saturating).
inline void Offer(RowState& r, uint32_t tag, uint64_t count) {
  const uint32_t cc = Sat32(count);
  if (cc > r.owner_count || (cc == r.owner_count && tag < r.tag) || r.tag == hash::kNoOwner) {
    r.tag = tag;
    r.owner_count = cc;
  }
  r.total = Sat32(uint64_t{r.total} + count);
  r.distinct = Sat32(uint64_t{r.distinct} + 1);
}

// Reads one byte per cache line of [p, p + bytes), in order.
inline void TouchLines(const void* p, size_t bytes) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += 64) (void)b[i];
}

// The owner cells of the table itself: TAGS and STATS (or the owner-count array), 2 cache lines
// a row.
struct TableCells {
  OwnerArrays* oa;
  RowState Load(uint64_t row) const {
    if (!oa->stats) return {oa->tags[row], oa->own[row], 0, 0};
    const uint8_t* st = oa->stats + row * format::kStatsRowSize;
    return {oa->tags[row], base::LoadLE<uint32_t>(st), base::LoadLE<uint32_t>(st + 4),
            base::LoadLE<uint32_t>(st + 8)};
  }
  void Store(uint64_t row, const RowState& r) const {
    oa->tags[row] = r.tag;
    if (!oa->stats) {
      oa->own[row] = r.owner_count;
      return;
    }
    uint8_t* st = oa->stats + row * format::kStatsRowSize;
    base::StoreLE<uint32_t>(st, r.owner_count);
    base::StoreLE<uint32_t>(st + 4, r.total);
    base::StoreLE<uint32_t>(st + 8, r.distinct);
  }
  // Reads rows [begin, end) in order, a word per cache line, to bring them into the cache.
  void Touch(uint64_t begin, uint64_t end) const {
    TouchLines(oa->tags + begin, (end - begin) * sizeof(uint32_t));
    if (oa->stats)
      TouchLines(oa->stats + begin * format::kStatsRowSize, (end - begin) * format::kStatsRowSize);
    else
      TouchLines(oa->own.data() + begin, (end - begin) * sizeof(uint32_t));
  }
  void Offer(uint64_t row, uint32_t tag, uint64_t count) const {
    RowState r = Load(row);
    builder::Offer(r, tag, count);
    Store(row, r);
  }
};

// The same cells packed 16 bytes a row (four to a cache line), copied into the table at the end.
struct StateCells {
  RowState* rows;
  void Touch(uint64_t begin, uint64_t end) const {
    TouchLines(rows + begin, (end - begin) * sizeof(RowState));
  }
  void Offer(uint64_t row, uint32_t tag, uint64_t count) const {
    builder::Offer(rows[row], tag, count);
  }
};

// An offer to a row of one sub-table: its bucket, and the record's owner tag and count.
struct RowOffer {
  uint32_t bucket, tag;
  uint64_t count;
};

// Rows are updated a region at a time: 2^15 rows of packed state (512 KiB) stay in cache and in
// the TLB while their offers are applied, where offers in record order would miss both on almost
// every row (a sub-table's rows span 16 MiB and more).
constexpr unsigned kRegionShift = 15;

// Applies m records of order n (ids, counts and owner tags) to the rows of sub-table (li, h):
// a row's owner is its n-gram with the highest count, ties to the smaller tag, and STATS add up.
// The outcome does not depend on the order of the records, nor on how they are split into calls,
// so the offers are first grouped by region of rows (a counting sort), then applied.
template <typename Cells>
void ApplyToSubTable(const format::Layout& l, const Cells& cells, size_t li, uint32_t h, uint32_t n,
                     const uint32_t* ids, const uint64_t* counts, const uint32_t* tags, int64_t m) {
  const hash::AddressSpec& s = l.spec;
  const size_t sub = s.SubIndex(li, n, h);
  const uint64_t base_row = l.row_offsets[sub];
  const uint64_t buckets = s.sizes[sub];
  if (buckets > (uint64_t{1} << 32)) {  // buckets beyond 32 bits: in record order
    for (int64_t k = 0; k < m; ++k)
      cells.Offer(base_row + hash::BucketOf(s, li, n, h, ids + k * n), tags[k], counts[k]);
    return;
  }
  const size_t regions = static_cast<size_t>((buckets >> kRegionShift) + 1);
  thread_local std::vector<RowOffer> offers, grouped;
  thread_local std::vector<size_t> at;
  offers.resize(static_cast<size_t>(m));
  grouped.resize(static_cast<size_t>(m));
  at.assign(regions + 1, 0);
  for (int64_t k = 0; k < m; ++k) {
    const auto bucket = static_cast<uint32_t>(hash::BucketOf(s, li, n, h, ids + k * n));
    offers[k] = {bucket, tags[k], counts[k]};
    ++at[(bucket >> kRegionShift) + 1];
  }
  for (size_t r = 1; r <= regions; ++r) at[r] += at[r - 1];
  for (const RowOffer& o : offers) grouped[at[o.bucket >> kRegionShift]++] = o;
  // at[r] is now where region r + 1 starts. A region's rows are read in order first (streamed,
  // at memory bandwidth), so that its offers, in random row order, hit the cache.
  size_t begin = 0;
  for (size_t r = 0; r < regions; ++r) {
    const size_t end = at[r];
    if (end == begin) continue;
    const uint64_t first = base_row + (uint64_t{r} << kRegionShift);
    cells.Touch(first, std::min(base_row + buckets, first + (uint64_t{1} << kRegionShift)));
    for (size_t k = begin; k < end; ++k)
      cells.Offer(base_row + grouped[k].bucket, grouped[k].tag, grouped[k].count);
    begin = end;
  }
}

}  // namespace

OwnerAssigner::OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads)
    : l_(layout), oa_(arrays), threads_(threads) {
  counts_.resize(kAssignChunk);
  tags_.resize(kAssignChunk);
}

void OwnerAssigner::BeginOrder(uint32_t order) {
  Flush();
  order_ = order;
  ids_.resize(kAssignChunk * order);
}

void OwnerAssigner::Add(const uint32_t* ids, uint64_t count) {
  std::memcpy(&ids_[n_ * order_], ids, order_ * 4);
  counts_[n_] = count;
  ++distinct_;
  if (++n_ == kAssignChunk) Flush();
}

void OwnerAssigner::Flush() {
  if (n_ == 0) return;
  const hash::AddressSpec& s = l_.spec;
  const uint32_t n = order_;
  const int64_t m = static_cast<int64_t>(n_);
  const uint32_t* ids = ids_.data();
  uint32_t* tags = tags_.data();
  // Owner tags do not depend on the sub-table: once per record, not once per head.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t k = 0; k < m; ++k) tags[k] = hash::OwnerTag(ids + k * n, n, l_.owner_tag_seed);
  // One job per sub-table of this order: rows of different jobs never meet.
  const int64_t jobs = static_cast<int64_t>(s.n_layers() * s.n_heads);
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (int64_t job = 0; job < jobs; ++job) {
    try {
      ApplyToSubTable(l_, TableCells{oa_}, static_cast<size_t>(job) / s.n_heads,
                      static_cast<uint32_t>(job % s.n_heads), n, ids, counts_.data(), tags, m);
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  n_ = 0;
}

uint64_t ExactCounter::AssignOwners(const format::Layout& l, OwnerArrays* oa,
                                    const std::function<void(uint64_t, uint64_t)>& progress) {
  const hash::AddressSpec& s = l.spec;
  const uint64_t total = records();
  const int64_t shares = static_cast<int64_t>(threads_.size());
  const size_t jobs = s.n_layers() * s.n_heads;
  // Shares meet in the rows: one lock per sub-table, and each share starts at a different one.
  std::vector<std::mutex> locks(s.n_subtables());
  std::atomic<uint64_t> done{0}, distinct{0};
  // Owners are chosen in packed row states (one cache line a row, not two), then copied out.
  base::ZeroedBuffer state_buf(l.total_rows * sizeof(RowState));
  const StateCells cells{static_cast<RowState*>(state_buf.data())};
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(shares))
  for (int64_t t = 0; t < shares; ++t) {
    try {
      std::vector<uint32_t> ids;
      std::vector<uint64_t> counts(kAssignChunk);
      std::vector<uint32_t> tags(kAssignChunk);
      size_t m = 0;
      for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) {
        ids.resize(kAssignChunk * n);
        NgramCounter& c = threads_[t]->counters[n - hash::kMinOrder];
        std::vector<std::unique_ptr<Source>> sources;
        for (const Run& r : runs_)
          if (r.order == n && r.share == t)
            sources.push_back(std::make_unique<RunSource>(r.path, n));
        const bool direct = sources.empty();  // the counter alone: complete, read unsorted
        auto report = [&](uint64_t consumed) {
          const uint64_t d = done += consumed;
          if (t == 0 && progress) progress(d, total);
        };
        auto flush = [&] {
          if (m == 0) return;
          for (size_t k = 0; k < m; ++k) tags[k] = hash::OwnerTag(&ids[k * n], n, l.owner_tag_seed);
          for (size_t j = 0; j < jobs; ++j) {
            const size_t job = (j + static_cast<size_t>(t) * jobs / shares) % jobs;
            const size_t li = job / s.n_heads;
            const uint32_t h = static_cast<uint32_t>(job % s.n_heads);
            std::lock_guard<std::mutex> lock(locks[s.SubIndex(li, n, h)]);
            ApplyToSubTable(l, cells, li, h, n, ids.data(), counts.data(), tags.data(),
                            static_cast<int64_t>(m));
          }
          distinct += m;
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
          if (c.size())
            sources.push_back(std::make_unique<MemSource>(c.SortRecords(), c.size(), n));
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
  const int64_t rows = static_cast<int64_t>(l.total_rows);
  const TableCells table{oa};
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(shares))
  for (int64_t r = 0; r < rows; ++r) table.Store(static_cast<uint64_t>(r), cells.rows[r]);
  return distinct;
}

SketchOwners::SketchOwners(const format::Layout& layout, int threads, uint32_t shard_index,
                           uint32_t shard_count)
    : l_(layout), threads_(threads), shard_index_(shard_index), shard_count_(shard_count) {
  cells_.assign(layout.total_rows, Cell{0, 0, 0, 0, 0});
}

SketchOwners::~SketchOwners() = default;

void SketchOwners::AddBlock(const TokenBlock& b) {
  const hash::AddressSpec& s = l_.spec;
  const uint32_t N = s.max_order, orders = N - 1;
  // Every position's full window (oldest first) and its n-grams' tags, computed once.
  std::vector<uint32_t> win;
  std::vector<uint32_t> tags;
  win.reserve(b.ids.size() * N);
  tags.reserve(b.ids.size() * orders);
  ForEachNgram(s, b, [&](uint32_t n, const uint32_t* ids) {
    if (n == hash::kMinOrder)
      win.insert(win.end(), ids + n - N, ids + n);  // ids + n - N = window start
    tags.push_back(hash::OwnerTag(ids, n, l_.owner_tag_seed));
  });
  const int64_t positions = static_cast<int64_t>(tags.size() / orders);
  std::vector<int64_t> jobs;
  for (size_t li = 0; li < s.n_layers(); ++li)
    for (uint32_t n = hash::kMinOrder; n <= N; ++n)
      for (uint32_t h = 0; h < s.n_heads; ++h)
        if (Owns(s.SubIndex(li, n, h))) jobs.push_back(static_cast<int64_t>(s.SubIndex(li, n, h)));
  const int64_t nj = static_cast<int64_t>(jobs.size());
  Cell* cells = cells_.data();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (int64_t j = 0; j < nj; ++j) {
    const size_t sub = static_cast<size_t>(jobs[j]);
    const size_t li = sub / s.per_layer();
    const uint32_t n = static_cast<uint32_t>((sub % s.per_layer()) / s.n_heads) + hash::kMinOrder;
    const uint32_t h = static_cast<uint32_t>(sub % s.n_heads);
    const uint64_t base_row = l_.row_offsets[sub];
    constexpr int64_t kBatch = 32;
    uint64_t rows[kBatch];
    for (int64_t p0 = 0; p0 < positions; p0 += kBatch) {
      const int64_t pe = std::min(positions, p0 + kBatch);
      // Hash a batch first and prefetch its cells, so that the cache misses overlap.
      for (int64_t p = p0; p < pe; ++p) {
        rows[p - p0] = base_row + hash::BucketOf(s, li, n, h, &win[p * N + (N - n)]);
        __builtin_prefetch(&cells[rows[p - p0]], 1);
      }
      for (int64_t p = p0; p < pe; ++p) {
        Cell& c = cells[rows[p - p0]];
        const uint32_t tag = tags[p * orders + (n - hash::kMinOrder)];
        if (c.tag == tag) {
          ++c.vote;
        } else if (c.vote == 0) {
          c.tag = tag;
          c.vote = 1;
        } else {
          --c.vote;
        }
        if (c.total != 0xFFFFFFFFu) ++c.total;
        c.seen |= static_cast<uint16_t>(1u << ((tag >> 7) & 15));
      }
    }
  }
}

void SketchOwners::Finish(OwnerArrays* oa) const {
  for (uint64_t r = 0; r < l_.total_rows; ++r) {
    const Cell& c = cells_[r];
    if (c.total == 0) continue;
    oa->tags[r] = c.tag;
    uint32_t zeros = 16 - static_cast<uint32_t>(__builtin_popcount(c.seen));
    // Linear counting over 16 bits: distinct ~ -16 ln(zeros / 16) (saturates near 44).
    double est = zeros == 0 ? 16.0 * std::log(16.0) : -16.0 * std::log(zeros / 16.0);
    uint32_t load = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(est)));
    if (oa->stats) {
      uint8_t* st = oa->stats + r * format::kStatsRowSize;
      base::StoreLE<uint32_t>(st, std::min(c.vote, c.total));
      base::StoreLE<uint32_t>(st + 4, c.total);
      base::StoreLE<uint32_t>(st + 8, load);
    } else {
      oa->own[r] = c.vote;
    }
  }
}

void SketchOwners::WriteCells(ZstdWriter& w) const {
  const hash::AddressSpec& s = l_.spec;
  uint64_t owned = 0;
  for (size_t sub = 0; sub < s.n_subtables(); ++sub) owned += Owns(sub);
  w.Write(&owned, 8);
  for (size_t sub = 0; sub < s.n_subtables(); ++sub) {
    if (!Owns(sub)) continue;
    uint64_t idx = sub;
    w.Write(&idx, 8);
    w.Write(&cells_[l_.row_offsets[sub]], s.sizes[sub] * sizeof(Cell));
  }
}

void SketchOwners::ReadCells(ZstdReader& r) {
  const hash::AddressSpec& s = l_.spec;
  uint64_t owned = 0;
  r.ReadExact(&owned, 8);
  ENGRAM_CHECK(owned <= s.n_subtables(), Code::kCorrupt,
               r.path() << ": bad sketch sub-table count");
  for (uint64_t k = 0; k < owned; ++k) {
    uint64_t sub = 0;
    r.ReadExact(&sub, 8);
    ENGRAM_CHECK(sub < s.n_subtables(), Code::kCorrupt, r.path() << ": bad sketch sub-table index");
    r.ReadExact(&cells_[l_.row_offsets[sub]], s.sizes[sub] * sizeof(Cell));
  }
}

}  // namespace engram::builder

// Sorted streams of (n-gram, count) records of one order, and their k-way merge: spill runs,
// part streams and in-memory counters merge into one stream in numeric n-gram order, counts of
// equal n-grams summed. Internal to the builder (exact_counter.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engram/base/error.h"
#include "engram/builder/zstd_stream.h"

namespace engram::builder {

// A merged stream's consumer: one record at a time.
using RecordSink = std::function<void(const uint32_t* ids, uint64_t count)>;

// Numeric lexicographic order of n ids: the order of every run and shard summary.
inline int CompareIds(const uint32_t* a, const uint32_t* b, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

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

// KWayMerge calls on_consumed(k) after every k input records (k = kMergeProgressEvery) and once
// at the end.
inline constexpr uint64_t kMergeProgressEvery = 1 << 20;

// Merges `sources` (all of order n, each sorted) into `sink`, summing the counts of equal n-grams.
void KWayMerge(std::vector<std::unique_ptr<Source>>& sources, uint32_t n, const RecordSink& sink,
               const std::function<void(uint64_t)>& on_consumed = {});

}  // namespace engram::builder

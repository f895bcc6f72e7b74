// Exact n-gram counting for one order in an open-addressing table of fixed-width keys
// (n canonical ids + a 64-bit count per slot). Memory is accounted so callers can bound it.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "engram/base/memory.h"
#include "engram/hash/addressing.h"

namespace engram::builder {

class NgramCounter {
 public:
  explicit NgramCounter(uint32_t order, size_t initial_capacity = 1 << 16);

  uint32_t order() const noexcept { return n_; }
  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return mask_ + 1; }
  size_t memory_bytes() const noexcept { return buf_.size(); }
  // New n-grams it takes before the next growth (which doubles memory_bytes(), in place).
  size_t headroom() const noexcept {
    size_t limit = capacity() * 7 / 10;
    return limit > size_ ? limit - size_ : 0;
  }
  // Bytes one distinct n-gram costs at the maximum load factor (for budgets and estimates).
  static size_t BytesPerEntry(uint32_t order) noexcept { return (order + 2) * 4 * 10 / 7 + 1; }

  // Adds one occurrence of the n-gram ids[0..n), later: pushes are gathered and counted kBatch
  // at a time, each slot's cache lines requested kAhead n-grams before it is probed, so the cache
  // misses of many n-grams overlap (a probe loop alone keeps one or two in flight). size() and the
  // slots do not show pending n-grams until their batch is counted or Drain() is called.
  void Push(const uint32_t* ids) { Push(ids, Hash(ids, n_)); }
  // The same, with hash = Hash(ids, order()) already computed (e.g. to pick the counter).
  void Push(const uint32_t* ids, uint64_t hash) {
    std::memcpy(&pending_ids_[pending_ * n_], ids, n_ * 4);
    pending_hash_[pending_] = hash;
    if (++pending_ == kBatch) Drain();
  }
  void Drain();
  // The slot hash of an n-gram; its high 32 bits are free for the caller (slots use low bits).
  static uint64_t Hash(const uint32_t* ids, uint32_t n) noexcept;
  static constexpr size_t kBatch = 256;
  static constexpr size_t kAhead = 24;
  // Empties the counter but keeps its capacity (the next fill needs no growth).
  void Clear();
  // Moves the size() records to the front of the slots, sorted by their ids in numeric
  // lexicographic order, and returns them: each is n ids then the count as a native u64 (the
  // spill run record). Add must not be called again before Clear().
  const uint32_t* SortRecords();
  // Calls f(ids, count) for every counted n-gram, in slot order (call Drain() first).
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t k = 0; k <= mask_; ++k)
      if (uint64_t c = CountAt(k)) f(&slots_[k * stride_], c);
  }

 private:
  // Occupied slots have count > 0.
  uint64_t CountAt(size_t slot) const noexcept {
    uint64_t c;
    std::memcpy(&c, &slots_[slot * stride_ + n_], 8);
    return c;
  }
  void Grow();
  size_t Probe(const uint32_t* ids, uint64_t hash) const noexcept;
  // Counts the pending n-grams (order N).
  template <uint32_t N>
  void CountPending();
  uint32_t n_;
  uint32_t stride_;  // words per slot
  size_t mask_ = 0;
  size_t size_ = 0;
  // Slots of stride_ words each, zeroed by the kernel (huge pages when large).
  base::ZeroedBuffer buf_;
  uint32_t* slots_ = nullptr;
  // Pushed n-grams not yet counted: ids (n each) and hashes.
  uint32_t pending_ids_[kBatch * hash::kMaxOrder];
  uint64_t pending_hash_[kBatch];
  size_t pending_ = 0;
};

}  // namespace engram::builder

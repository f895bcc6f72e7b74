// Linear-probing n-gram counter.
#include "engram/builder/ngram_counter.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "engram/base/error.h"

namespace engram::builder {

namespace {
inline uint64_t Mix(const uint32_t* ids, uint32_t n) noexcept {
  uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
  for (uint32_t i = 0; i < n; ++i) {
    h ^= ids[i];
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}
// A record of an order-N counter, sorted in place by its ids.
template <uint32_t N>
struct Record {
  uint32_t w[N + 2];
};

// Ids i and i+1 as one number that orders like the pair.
template <uint32_t N>
inline uint64_t PairAt(const Record<N>& r, uint32_t i) noexcept {
  return (uint64_t{r.w[i]} << 32) | r.w[i + 1];
}

template <uint32_t N>
void SortAs(uint32_t* words, size_t count) {
  auto* r = reinterpret_cast<Record<N>*>(words);
  // Two ids per comparison: half the branches of comparing id by id.
  std::sort(r, r + count, [](const Record<N>& a, const Record<N>& b) {
    uint32_t i = 0;
    for (; i + 1 < N; i += 2) {
      const uint64_t x = PairAt(a, i), y = PairAt(b, i);
      if (x != y) return x < y;
    }
    if constexpr (N % 2) return a.w[N - 1] < b.w[N - 1];
    return false;
  });
}
}  // namespace

NgramCounter::NgramCounter(uint32_t order, size_t initial_capacity)
    : n_(order), stride_(order + 2) {
  ENGRAM_CHECK(order >= hash::kMinOrder && order <= hash::kMaxOrder, Code::kInvalidArgument,
               "n-gram order " << order << ": counters take orders " << hash::kMinOrder << ".."
                               << hash::kMaxOrder);
  size_t cap = 16;
  while (cap < initial_capacity) cap <<= 1;
  mask_ = cap - 1;
  buf_ = base::ZeroedBuffer(cap * stride_ * 4);
  slots_ = static_cast<uint32_t*>(buf_.data());
}

size_t NgramCounter::Probe(const uint32_t* ids, uint64_t hash) const noexcept {
  size_t i = hash & mask_;
  while (true) {
    const uint32_t* s = &slots_[i * stride_];
    if (CountAt(i) == 0) return i;
    uint32_t k = 0;
    while (k < n_ && s[k] == ids[k]) ++k;
    if (k == n_) return i;
    i = (i + 1) & mask_;
  }
}

uint64_t NgramCounter::Hash(const uint32_t* ids, uint32_t n) noexcept { return Mix(ids, n); }

template <uint32_t N>
void NgramCounter::CountPending() {
  constexpr uint32_t kStride = N + 2;
  const size_t m = pending_;
  auto request = [&](size_t k) {
    const uint32_t* slot = &slots_[(pending_hash_[k] & mask_) * kStride];
    __builtin_prefetch(slot, 1);
    __builtin_prefetch(slot + kStride - 1, 1);  // a slot may straddle two cache lines
  };
  for (size_t k = 0; k < std::min(kAhead, m); ++k) request(k);
  for (size_t k = 0; k < m; ++k) {
    if (k + kAhead < m) request(k + kAhead);
    if ((size_ + 1) * 10 > capacity() * 7) Grow();
    const uint32_t* key = &pending_ids_[k * N];
    for (size_t i = pending_hash_[k] & mask_;; i = (i + 1) & mask_) {
      uint32_t* s = &slots_[i * kStride];
      uint64_t c;
      std::memcpy(&c, s + N, 8);
      if (c == 0) {
        std::memcpy(s, key, N * 4);
        ++size_;
      } else if (std::memcmp(s, key, N * 4) != 0) {
        continue;
      }
      ++c;
      std::memcpy(s + N, &c, 8);
      break;
    }
  }
  pending_ = 0;
}

void NgramCounter::Drain() {
  if (!pending_) return;
  switch (n_) {  // one probe loop per order, its key compares and copies of fixed size
    case 2:
      return CountPending<2>();
    case 3:
      return CountPending<3>();
    case 4:
      return CountPending<4>();
    case 5:
      return CountPending<5>();
    case 6:
      return CountPending<6>();
    case 7:
      return CountPending<7>();
    case 8:
      return CountPending<8>();
  }
  static_assert(hash::kMaxOrder == 8, "a CountPending case per order");
}

// Doubles the table in place: the buffer grows (remapped, not copied), so growing never holds
// the old slots and the new ones at once. Doubling only adds a high bit to the slot index, so an
// n-gram's new home is its old home h or h + C (C the old capacity). The slots are re-inserted in
// probe order, starting after an empty slot s0 so that no cluster is entered in its middle; the
// slots before s0 (a cluster that wrapped past the old end, or the start of one) first move to
// C + their index, where the doubled table would have them had it not wrapped. Then every slot
// is taken out and re-inserted in that order: a re-inserted n-gram stops at the latest at the slot
// it was taken from, so its probe path holds only n-grams already re-inserted, and those never
// move again. Every n-gram is therefore found from its new home.
void NgramCounter::Grow() {
  const size_t cap = mask_ + 1;
  size_t s0 = 0;
  while (CountAt(s0) != 0) ++s0;  // the load stays below 0.7: an empty slot exists
  buf_.Grow(2 * cap * stride_ * 4);
  slots_ = static_cast<uint32_t*>(buf_.data());
  mask_ = 2 * cap - 1;
  const size_t bytes = stride_ * 4;
  if (s0) {  // [0, s0) to [C, C + s0): that range of the new half is still empty
    std::memcpy(&slots_[cap * stride_], slots_, s0 * bytes);
    std::memset(slots_, 0, s0 * bytes);
  }
  uint32_t rec[hash::kMaxOrder + 2];
  for (size_t p = s0 + 1; p < cap + s0; ++p) {
    uint32_t* s = &slots_[p * stride_];
    if (CountAt(p) == 0) continue;
    std::memcpy(rec, s, bytes);
    std::memset(s, 0, bytes);
    const size_t i = Probe(rec, Mix(rec, n_));
    std::memcpy(&slots_[i * stride_], rec, bytes);
  }
}

void NgramCounter::Clear() {
  buf_.Zero();
  size_ = 0;
}

const uint32_t* NgramCounter::SortRecords() {
  // Compact: occupied slots keep their relative order and only move toward the front.
  size_t out = 0;
  for (size_t k = 0; k <= mask_; ++k) {
    if (CountAt(k) == 0) continue;
    if (out != k)
      std::memmove(&slots_[out * stride_], &slots_[k * stride_], stride_ * sizeof(uint32_t));
    ++out;
  }
  // One sort per order, indexed by n (orders 2..8).
  static constexpr void (*kSort[])(uint32_t*, size_t) = {nullptr,   nullptr,   SortAs<2>,
                                                         SortAs<3>, SortAs<4>, SortAs<5>,
                                                         SortAs<6>, SortAs<7>, SortAs<8>};
  static_assert(std::size(kSort) == hash::kMaxOrder + 1);
  kSort[n_](slots_, out);
  return slots_;
}

}  // namespace engram::builder

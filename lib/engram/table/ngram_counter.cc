// Linear-probing n-gram counter.
#include "engram/table/ngram_counter.h"

namespace engram::table {

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
}  // namespace

NgramCounter::NgramCounter(uint32_t order, size_t initial_capacity)
    : n_(order), stride_(order + 2) {
  size_t cap = 16;
  while (cap < initial_capacity) cap <<= 1;
  mask_ = cap - 1;
  slots_.assign(cap * stride_, 0);
}

size_t NgramCounter::Probe(const uint32_t* ids) const noexcept {
  size_t i = Mix(ids, n_) & mask_;
  while (true) {
    const uint32_t* s = &slots_[i * stride_];
    if (CountAt(i) == 0 || std::memcmp(s, ids, n_ * 4) == 0) return i;
    i = (i + 1) & mask_;
  }
}

void NgramCounter::Add(const uint32_t* ids, uint64_t count) {
  if ((size_ + 1) * 10 > capacity() * 7) Grow();
  size_t i = Probe(ids);
  uint32_t* s = &slots_[i * stride_];
  uint64_t c = CountAt(i);
  if (c == 0) {
    std::memcpy(s, ids, n_ * 4);
    ++size_;
  }
  c += count;
  std::memcpy(s + n_, &c, 8);
}

void NgramCounter::Grow() {
  std::vector<uint32_t> old;
  old.swap(slots_);
  size_t old_cap = mask_ + 1;
  mask_ = old_cap * 2 - 1;
  slots_.assign((mask_ + 1) * stride_, 0);
  for (size_t k = 0; k < old_cap; ++k) {
    const uint32_t* s = &old[k * stride_];
    uint64_t c;
    std::memcpy(&c, s + n_, 8);
    if (c == 0) continue;
    size_t i = Probe(s);
    std::memcpy(&slots_[i * stride_], s, stride_ * 4);
  }
}

void NgramCounter::Clear() {
  std::fill(slots_.begin(), slots_.end(), 0u);
  size_ = 0;
}

}  // namespace engram::table

// A bit-exact reproduction of numpy's default_rng(seed).integers(0, high, size=n, dtype=int64):
// SeedSequence entropy mixing, the PCG64 (XSL-RR 128/64) bit generator and numpy's Lemire
// bounded-integer method. Used to derive DeepSeek-compatible hash multipliers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engram::hash {

// numpy.random.SeedSequence(entropy).generate_state(n_words, np.uint64) for a non-negative
// integer entropy.
std::vector<uint64_t> SeedSequenceState(uint64_t entropy, size_t n_words);

class Pcg64 {
 public:
  // Equivalent of numpy.random.PCG64(seed) (seeded through SeedSequence).
  explicit Pcg64(uint64_t seed);
  uint64_t Next64() noexcept;
  uint32_t Next32() noexcept;  // numpy's buffered 32-bit draw (low half first)

 private:
  unsigned __int128 state_;
  unsigned __int128 inc_;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// numpy default_rng(seed).integers(0, high, size=n, dtype=np.int64) for 1 <= high.
std::vector<int64_t> NumpyIntegers(uint64_t seed, int64_t high, size_t n);

}  // namespace engram::hash

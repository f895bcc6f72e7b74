// numpy SeedSequence + PCG64 + bounded integers, reproduced from their published algorithms
// (numpy/random/bit_generator.pyx, pcg64.h, distributions.c) for bit-exact multipliers.
#include "engram/hash/numpy_random.h"

namespace engram::hash {
namespace {

constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr size_t kPoolSize = 4;

uint32_t HashMix(uint32_t value, uint32_t* hash_const) {
  value ^= *hash_const;
  *hash_const *= kMultA;
  value *= *hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

}  // namespace

std::vector<uint64_t> SeedSequenceState(uint64_t entropy, size_t n_words) {
  // Entropy as 32-bit words, least significant first; 0 is one zero word.
  std::vector<uint32_t> words;
  if (entropy == 0) words.push_back(0);
  while (entropy > 0) {
    words.push_back(static_cast<uint32_t>(entropy & 0xFFFFFFFFu));
    entropy >>= 32;
  }
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < kPoolSize; ++i)
    pool[i] = HashMix(i < words.size() ? words[i] : 0u, &hash_const);
  for (size_t src = 0; src < kPoolSize; ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], &hash_const));
  for (size_t src = kPoolSize; src < words.size(); ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = Mix(pool[dst], HashMix(words[src], &hash_const));

  std::vector<uint32_t> state32(n_words * 2);
  uint32_t hc = kInitB;
  for (size_t i = 0; i < state32.size(); ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hc;
    hc *= kMultB;
    v *= hc;
    v ^= v >> kXShift;
    state32[i] = v;
  }
  std::vector<uint64_t> out(n_words);
  for (size_t i = 0; i < n_words; ++i)
    out[i] =
        static_cast<uint64_t>(state32[2 * i]) | (static_cast<uint64_t>(state32[2 * i + 1]) << 32);
  return out;
}

namespace {
constexpr unsigned __int128 kPcgMult =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) + 4865540595714422341ULL;
}

Pcg64::Pcg64(uint64_t seed) {
  std::vector<uint64_t> s = SeedSequenceState(seed, 4);
  unsigned __int128 initstate = (static_cast<unsigned __int128>(s[0]) << 64) | s[1];
  unsigned __int128 initseq = (static_cast<unsigned __int128>(s[2]) << 64) | s[3];
  state_ = 0;
  inc_ = (initseq << 1) | 1;
  state_ = state_ * kPcgMult + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMult + inc_;
}

uint64_t Pcg64::Next64() noexcept {
  state_ = state_ * kPcgMult + inc_;
  uint64_t hi = static_cast<uint64_t>(state_ >> 64);
  uint64_t lo = static_cast<uint64_t>(state_);
  unsigned rot = static_cast<unsigned>(state_ >> 122);
  uint64_t x = hi ^ lo;
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t Pcg64::Next32() noexcept {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  uint64_t next = Next64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xFFFFFFFFu);
}

std::vector<int64_t> NumpyIntegers(uint64_t seed, int64_t high, size_t n) {
  Pcg64 g(seed);
  std::vector<int64_t> out(n, 0);
  if (high <= 1) return out;  // rng == 0: numpy returns low without drawing
  uint64_t rng = static_cast<uint64_t>(high - 1);
  if (rng <= 0xFFFFFFFFu) {
    uint32_t r32 = static_cast<uint32_t>(rng);
    for (size_t i = 0; i < n; ++i) {
      if (r32 == 0xFFFFFFFFu) {
        out[i] = g.Next32();
        continue;
      }
      uint32_t excl = r32 + 1;
      uint64_t m = static_cast<uint64_t>(g.Next32()) * excl;
      uint32_t left = static_cast<uint32_t>(m);
      if (left < excl) {
        uint32_t threshold = (0xFFFFFFFFu - r32) % excl;
        while (left < threshold) {
          m = static_cast<uint64_t>(g.Next32()) * excl;
          left = static_cast<uint32_t>(m);
        }
      }
      out[i] = static_cast<int64_t>(m >> 32);
    }
    return out;
  }
  uint64_t excl = rng + 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned __int128 m = static_cast<unsigned __int128>(g.Next64()) * excl;
    uint64_t left = static_cast<uint64_t>(m);
    if (left < excl) {
      uint64_t threshold = (UINT64_MAX - rng) % excl;
      while (left < threshold) {
        m = static_cast<unsigned __int128>(g.Next64()) * excl;
        left = static_cast<uint64_t>(m);
      }
    }
    out[i] = static_cast<int64_t>(m >> 64);
  }
  return out;
}

}  // namespace engram::hash

// XXH3-64 with a seed for inputs of 4..32 bytes (n-grams of orders 1..8 as u32 ids), written as
// host/device code so CUDA kernels hash exactly like the CPU. Bit-identical to XXH3_64bits_withSeed
// with the default secret (checked against libxxhash by tests/unit/hash). The 192-byte secret is
// passed in (Xxh3Secret() on the host; a __constant__ copy on the device).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ENGRAM_HD __host__ __device__ __forceinline__
#else
#define ENGRAM_HD inline
#endif

namespace engram::hash::xxh3 {

ENGRAM_HD uint64_t Read64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
ENGRAM_HD uint32_t Read32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
ENGRAM_HD uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
ENGRAM_HD uint32_t Swap32(uint32_t x) {
  return (x << 24) | ((x << 8) & 0x00FF0000u) | ((x >> 8) & 0x0000FF00u) | (x >> 24);
}
ENGRAM_HD uint64_t Swap64(uint64_t x) {
  return (static_cast<uint64_t>(Swap32(static_cast<uint32_t>(x))) << 32) |
         Swap32(static_cast<uint32_t>(x >> 32));
}
ENGRAM_HD uint64_t MulFold(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}
ENGRAM_HD uint64_t Avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  h ^= h >> 32;
  return h;
}
ENGRAM_HD uint64_t Rrmxmx(uint64_t h, uint64_t len) {
  h ^= Rotl(h, 49) ^ Rotl(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}
ENGRAM_HD uint64_t Mix16(const uint8_t* in, const uint8_t* secret, uint64_t seed) {
  return MulFold(Read64(in) ^ (Read64(secret) + seed),
                 Read64(in + 8) ^ (Read64(secret + 8) - seed));
}

// XXH3_64bits_withSeed(input, len, seed) for 4 <= len <= 32.
ENGRAM_HD uint64_t Hash4To32(const uint8_t* in, uint32_t len, uint64_t seed,
                             const uint8_t* secret) {
  if (len <= 8) {
    seed ^= static_cast<uint64_t>(Swap32(static_cast<uint32_t>(seed))) << 32;
    const uint64_t bitflip = (Read64(secret + 8) ^ Read64(secret + 16)) - seed;
    const uint64_t input64 = Read32(in + len - 4) + (static_cast<uint64_t>(Read32(in)) << 32);
    return Rrmxmx(input64 ^ bitflip, len);
  }
  if (len <= 16) {
    const uint64_t lo = Read64(in) ^ ((Read64(secret + 24) ^ Read64(secret + 32)) + seed);
    const uint64_t hi = Read64(in + len - 8) ^ ((Read64(secret + 40) ^ Read64(secret + 48)) - seed);
    return Avalanche(len + Swap64(lo) + hi + MulFold(lo, hi));
  }
  uint64_t acc = len * 0x9E3779B185EBCA87ull;
  acc += Mix16(in, secret, seed);
  acc += Mix16(in + len - 16, secret + 16, seed);
  return Avalanche(acc);
}

}  // namespace engram::hash::xxh3

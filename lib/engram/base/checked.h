// Overflow-checked arithmetic for offsets and sizes taken from untrusted files and flags.
#pragma once

#include <cstdint>
#include <optional>

namespace engram::base {

// a + b, or nullopt on unsigned overflow.
inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b, or nullopt on unsigned overflow.
inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) noexcept {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// True when [offset, offset + size) lies inside [0, limit), without overflow.
inline bool RangeWithin(uint64_t offset, uint64_t size, uint64_t limit) noexcept {
  return offset <= limit && size <= limit - offset;
}

inline constexpr uint64_t AlignUp(uint64_t v, uint64_t alignment) noexcept {
  return (v + alignment - 1) / alignment * alignment;
}

inline constexpr bool IsPowerOfTwo(uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// The power of two nearest to v (the larger one on a tie), for "use 2097152" suggestions.
inline constexpr uint64_t NearestPowerOfTwo(uint64_t v) noexcept {
  uint64_t hi = 1;
  while (hi < v && hi < (uint64_t{1} << 62)) hi <<= 1;
  uint64_t lo = hi >> 1;
  return (lo && v - lo < hi - v) ? lo : hi;
}

inline constexpr int Log2Floor(uint64_t v) noexcept { return v ? 63 - __builtin_clzll(v) : -1; }

}  // namespace engram::base

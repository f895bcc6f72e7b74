// Bit-exact float <-> bf16/f16/fp8-e4m3/e8m0 conversions (round to nearest even).
#include "engram/base/dtype.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace engram::base {

std::string_view DTypeName(DType t) noexcept {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kF8E4M3:
      return "fp8-e4m3";
    case DType::kI8:
      return "int8";
    case DType::kI4:
      return "int4";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view n) noexcept {
  if (n == "f32" || n == "float32" || n == "fp32" || n == "float") return DType::kF32;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "f16" || n == "float16" || n == "fp16" || n == "half") return DType::kF16;
  if (n == "fp8-e4m3" || n == "fp8" || n == "float8_e4m3" || n == "float8_e4m3fn" || n == "e4m3" ||
      n == "f8_e4m3")
    return DType::kF8E4M3;
  if (n == "int8" || n == "i8" || n == "q8") return DType::kI8;
  if (n == "int4" || n == "i4" || n == "q4") return DType::kI4;
  return std::nullopt;
}

bool IsValidDType(uint32_t code) noexcept { return code <= 5; }

uint32_t BlockSize(DType t) noexcept {
  return t == DType::kF8E4M3 ? kFp8BlockSize : t == DType::kI4 ? kI4BlockSize : 1;
}

uint64_t RowBytes(DType t, uint64_t n) noexcept {
  switch (t) {
    case DType::kF32:
      return 4 * n;
    case DType::kBF16:
    case DType::kF16:
      return 2 * n;
    case DType::kF8E4M3:
    case DType::kI8:
      return n;
    case DType::kI4:
      return (n + 1) / 2;
  }
  return 0;
}

uint64_t ScaleBytes(DType t, uint64_t n) noexcept {
  switch (t) {
    case DType::kF8E4M3:
      return (n + kFp8BlockSize - 1) / kFp8BlockSize;
    case DType::kI8:
      return 4;
    case DType::kI4:
      return 2 * ((n + kI4BlockSize - 1) / kI4BlockSize);
    default:
      return 0;
  }
}

uint16_t FloatToBF16(float f) noexcept {
  uint32_t b = std::bit_cast<uint32_t>(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);  // NaN
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

float BF16ToFloat(uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t FloatToF16(float f) noexcept {
  uint32_t b = std::bit_cast<uint32_t>(f);
  uint32_t sign = (b >> 16) & 0x8000u;
  uint32_t abs = b & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24 rounded to nearest even.
    float a = std::bit_cast<float>(abs);
    float q = std::nearbyint(a * 16777216.0f);  // exact scaling by 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t exp = ((abs >> 23) - 127 + 15);
  uint32_t mant = abs & 0x7FFFFFu;
  uint32_t r = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) ++r;  // carries into exponent correctly
  return static_cast<uint16_t>(sign | r);
}

float F16ToFloat(uint16_t h) noexcept {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint8_t FloatToE4M3(float f) noexcept {
  uint32_t b = std::bit_cast<uint32_t>(f);
  uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  uint32_t abs = b & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);  // NaN
  float a = std::bit_cast<float>(abs);
  if (a >= 448.0f) return static_cast<uint8_t>(sign | 0x7Eu);  // saturate (incl. inf)
  if (a < 0.015625f) {                                         // below 2^-6: subnormal grid 2^-9
    float q = std::nearbyint(a * 512.0f);                      // 0..8; 8 is the smallest normal
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t exp = (abs >> 23) - 127 + 7;
  uint32_t mant = abs & 0x7FFFFFu;
  uint32_t r = (exp << 3) | (mant >> 20);
  uint32_t rest = mant & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (r & 1u))) ++r;
  if (r > 0x7Eu) r = 0x7Eu;
  return static_cast<uint8_t>(sign | r);
}

namespace {
std::array<float, 256> MakeE4M3Table() {
  std::array<float, 256> t{};
  for (int q = 0; q < 256; ++q) {
    int sign = q & 0x80, exp = (q >> 3) & 0xF, mant = q & 7;
    float v;
    if (exp == 15 && mant == 7)
      v = std::numeric_limits<float>::quiet_NaN();
    else if (exp == 0)
      v = std::ldexp(static_cast<float>(mant), -9);
    else
      v = std::ldexp(1.0f + mant / 8.0f, exp - 7);
    t[q] = sign ? -v : v;
  }
  return t;
}
const std::array<float, 256> kE4M3 = MakeE4M3Table();
}  // namespace

float E4M3ToFloat(uint8_t q) noexcept { return kE4M3[q]; }

float E8M0ToFloat(uint8_t e) noexcept {
  if (e == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127 is a float subnormal
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

namespace {
// max |x| of n values, NaN ignored: on the bit patterns (non-negative floats order as integers),
// which vectorizes where a float max does not (its NaN rules).
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) float AbsMax(
    const float* x, size_t n) noexcept {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    b &= 0x7FFFFFFFu;
    b = b > 0x7F800000u ? 0u : b;
    m = b > m ? b : m;
  }
  return std::bit_cast<float>(m);
}

// Rounds |v| <= 2^22 to the nearest integer, ties to even (the default rounding mode), without a
// libm call: adding 1.5 x 2^23 leaves no fraction bits. NaN stays NaN. Vectorizes.
inline float RoundToInt(float v) noexcept { return (v + 0x1.8p23f) - 0x1.8p23f; }

// q = round(x * inv) clamped to +-limit, as bytes (int8) or floats (int4's nibbles are packed by
// the caller). NaN becomes 0.
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) void QuantizeInts(
    const float* in, size_t n, float inv, float limit, float* q) noexcept {
  for (size_t i = 0; i < n; ++i) {
    const float v = in[i] * inv;
    const float r = RoundToInt(v < -limit ? -limit : v > limit ? limit : v);
    q[i] = r == r ? r : 0.0f;
  }
}
// Smallest power of two s = 2^(e-127) with amax / s <= 448.
uint8_t ScaleFor(float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 127;
  int e = 127;
  // Start from the exponent of amax/448 and adjust; at most a couple of steps.
  int exp2;
  std::frexp(amax / 448.0f, &exp2);  // amax/448 = m * 2^exp2, m in [0.5, 1)
  e = 127 + exp2;
  while (e > 1 && amax / E8M0ToFloat(static_cast<uint8_t>(e - 1)) <= 448.0f) --e;
  while (e < 254 && amax / E8M0ToFloat(static_cast<uint8_t>(e)) > 448.0f) ++e;
  return static_cast<uint8_t>(std::clamp(e, 0, 254));
}
}  // namespace

void EncodeRow(DType t, std::span<const float> in, uint8_t* out, uint8_t* scales) noexcept {
  size_t n = in.size();
  switch (t) {
    case DType::kF32:
      std::memcpy(out, in.data(), n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = FloatToBF16(in[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = FloatToF16(in[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::kF8E4M3:
      for (size_t b = 0; b * kFp8BlockSize < n; ++b) {
        float amax = 0;
        for (size_t i = b * kFp8BlockSize; i < (b + 1) * kFp8BlockSize && i < n; ++i)
          amax = std::max(amax, std::fabs(in[i]));
        uint8_t e = ScaleFor(amax);
        scales[b] = e;
        float inv = 1.0f / E8M0ToFloat(e);  // exact: a power of two
        for (size_t i = b * kFp8BlockSize; i < (b + 1) * kFp8BlockSize && i < n; ++i)
          out[i] = FloatToE4M3(in[i] * inv);
      }
      return;
    case DType::kI8: {
      float amax = AbsMax(in.data(), n);  // NaN never wins a max
      amax = std::min(amax, std::numeric_limits<float>::max());
      const float s = amax / 127.0f;
      const float inv = s > 0 ? 1.0f / s : 0.0f;
      std::memcpy(scales, &s, 4);
      float q[256];
      for (size_t i0 = 0; i0 < n; i0 += 256) {
        const size_t m = std::min<size_t>(256, n - i0);
        QuantizeInts(in.data() + i0, m, inv, 127.0f, q);
        for (size_t i = 0; i < m; ++i)
          out[i0 + i] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(q[i])));
      }
      return;
    }
    case DType::kI4:
      for (size_t b = 0; b * kI4BlockSize < n; ++b) {
        const size_t lo = b * kI4BlockSize, hi = std::min(n, lo + kI4BlockSize);
        const float amax = AbsMax(in.data() + lo, hi - lo);
        uint16_t h = FloatToF16(std::min(amax / 7.0f, 65504.0f));
        if (F16ToFloat(h) < amax / 7.0f && h < 0x7BFF) ++h;  // round up: |x| / s <= 7
        std::memcpy(scales + 2 * b, &h, 2);
        const float s = F16ToFloat(h);
        const float inv = s > 0 ? 1.0f / s : 0.0f;
        float q[kI4BlockSize];
        QuantizeInts(in.data() + lo, hi - lo, inv, 7.0f, q);
        for (size_t k = 0; k < hi - lo; k += 2) {  // lo is even: pairs share a byte
          const int lo_nib = static_cast<int>(q[k]) + 8;
          const int hi_nib = k + 1 < hi - lo ? static_cast<int>(q[k + 1]) + 8 : 0;  // an odd end: 0
          out[(lo + k) / 2] = static_cast<uint8_t>(lo_nib | (hi_nib << 4));
        }
      }
      return;
  }
}

void DecodeRow(DType t, const uint8_t* in, const uint8_t* scales, std::span<float> out) noexcept {
  size_t n = out.size();
  switch (t) {
    case DType::kF32:
      std::memcpy(out.data(), in, n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = BF16ToFloat(h);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = F16ToFloat(h);
      }
      return;
    case DType::kF8E4M3:
      for (size_t b = 0; b < n; b += kFp8BlockSize) {  // a block's scale decoded once
        const float s = E8M0ToFloat(scales[b / kFp8BlockSize]);
        for (size_t i = b; i < std::min(n, b + kFp8BlockSize); ++i) out[i] = kE4M3[in[i]] * s;
      }
      return;
    case DType::kI8: {
      float s;
      std::memcpy(&s, scales, 4);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(in[i])) * s;
      return;
    }
    case DType::kI4:
      for (size_t b = 0; b < n; b += kI4BlockSize) {  // a block's scale decoded once
        uint16_t h;
        std::memcpy(&h, scales + 2 * (b / kI4BlockSize), 2);
        const float s = F16ToFloat(h);
        for (size_t i = b; i < std::min(n, b + kI4BlockSize); ++i) {
          const int nib = i % 2 ? in[i / 2] >> 4 : in[i / 2] & 0x0F;
          out[i] = static_cast<float>(nib - 8) * s;
        }
      }
      return;
  }
}

namespace {

// Bit 7 of a byte lane (15, 31 of 16- and 32-bit lanes) of the result is set when some lane of
// the bytes has all the bits of `mask` set: (x & mask) + low carries into the lane's top bit
// exactly then (low is mask's lowest bit in each lane; mask leaves the top bit clear). With
// `and_top`, the lane's own top bit must be set too. No branches, and built for AVX2 where the
// CPU has it: finite rows, nearly all, cost a fraction of a cycle a byte.
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) uint64_t LanesAllOnes(
    const uint8_t* p, size_t bytes, uint64_t mask, uint64_t low, bool and_top) noexcept {
  const uint64_t top = (mask + low) & ~mask;
  const uint64_t keep = and_top ? top : 0;  // the top bits x must have too
  uint64_t acc = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    acc |= ((x & mask) + low) & (x | ~keep);
  }
  if (i < bytes) {  // a zero-padded last word: zeros never match
    uint64_t x = 0;
    std::memcpy(&x, p + i, bytes - i);
    acc |= ((x & mask) + low) & (x | ~keep);
  }
  return acc & top;
}

// True when the bits alone show every value finite. Exact for f32/bf16/f16; for fp8 it also
// requires every block scale below 0xF0 (scales that high are checked value by value).
bool BitsFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept {
  switch (t) {
    case DType::kF32:
      return !LanesAllOnes(in, 4 * n, 0x7F8000007F800000ull, 0x0080000000800000ull, false);
    case DType::kBF16:
      return !LanesAllOnes(in, 2 * n, 0x7F807F807F807F80ull, 0x0080008000800080ull, false);
    case DType::kF16:
      return !LanesAllOnes(in, 2 * n, 0x7C007C007C007C00ull, 0x0400040004000400ull, false);
    case DType::kF8E4M3:
      return Fp8ValuesFinite(in, n) &&
             Fp8ScalesBelowF0(scales, (n + kFp8BlockSize - 1) / kFp8BlockSize);
    case DType::kI8:
    case DType::kI4:
      return !scales || ScalesSafe(t, scales, ScaleBytes(t, n));
  }
  return false;
}

}  // namespace

// No NaN byte (low 7 bits all set).
bool Fp8ValuesFinite(const uint8_t* in, size_t n) noexcept {
  return !LanesAllOnes(in, n, 0x7F7F7F7F7F7F7F7Full, 0x0101010101010101ull, false);
}

// No scale >= 0xF0 (bits 4..7 all set).
bool Fp8ScalesBelowF0(const uint8_t* scales, size_t n_scales) noexcept {
  return !LanesAllOnes(scales, n_scales, 0x7070707070707070ull, 0x1010101010101010ull, true);
}

bool ScalesSafe(DType t, const uint8_t* scales, size_t bytes) noexcept {
  switch (t) {
    case DType::kF8E4M3:
      return Fp8ScalesBelowF0(scales, bytes);
    case DType::kI8:  // exponent 248..255 (2^121 and up, Inf, NaN): 127 s may overflow
      return !LanesAllOnes(scales, bytes, 0x7C0000007C000000ull, 0x0400000004000000ull, false);
    case DType::kI4:  // 7 x 65504 is finite: only Inf and NaN scales
      return !LanesAllOnes(scales, bytes, 0x7C007C007C007C00ull, 0x0400040004000400ull, false);
    default:
      return true;
  }
}

size_t FirstNonFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept {
  if (BitsFinite(t, in, scales, n)) return n;
  switch (t) {
    case DType::kF32:
      for (size_t i = 0; i < n; ++i) {
        uint32_t x;
        std::memcpy(&x, in + 4 * i, 4);
        if ((x & 0x7F800000u) == 0x7F800000u) return i;
      }
      return n;
    case DType::kBF16:
    case DType::kF16: {
      const uint16_t mask = t == DType::kBF16 ? 0x7F80 : 0x7C00;
      for (size_t i = 0; i < n; ++i) {
        uint16_t x;
        std::memcpy(&x, in + 2 * i, 2);
        if ((x & mask) == mask) return i;
      }
      return n;
    }
    case DType::kF8E4M3:
      for (size_t i = 0; i < n; ++i) {
        const uint8_t s = scales[i / kFp8BlockSize];
        // 448 * 2^(s-127) stays below FLT_MAX up to s = 246; above it, decode.
        if ((in[i] & 0x7F) == 0x7F || s == 0xFF ||
            (s > 246 && !std::isfinite(kE4M3[in[i]] * E8M0ToFloat(s))))
          return i;
      }
      return n;
    case DType::kI8:
    case DType::kI4: {  // an unsafe scale: decode the values, 32 at a time (an int4 block)
      std::array<float, kI4BlockSize> v;
      for (size_t b = 0; b < n; b += v.size()) {
        const size_t m = std::min(v.size(), n - b);
        // int8: the row's one scale; int4: this block's.
        DecodeRow(t, in + RowBytes(t, b), scales + (t == DType::kI8 ? 0 : 2 * (b / kI4BlockSize)),
                  std::span<float>(v.data(), m));
        for (size_t k = 0; k < m; ++k)
          if (!std::isfinite(v[k])) return b + k;
      }
      return n;
    }
  }
  return 0;
}

bool AllFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept {
  return FirstNonFinite(t, in, scales, n) == n;
}

float MaxFinite(DType t) noexcept {
  switch (t) {
    case DType::kF32:
    case DType::kF8E4M3:
      return std::numeric_limits<float>::max();
    case DType::kBF16:
      return BF16ToFloat(0x7F7F);
    case DType::kF16:
      return 65504.0f;
    case DType::kI8:
      return std::numeric_limits<float>::max();
    case DType::kI4:
      return 65504.0f * 7.0f;
  }
  return 0;
}

}  // namespace engram::base

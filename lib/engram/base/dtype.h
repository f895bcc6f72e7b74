// Storage dtypes of table rows and checkpoint tensors, and exact conversions between them.
// fp8 is OCP e4m3fn (bias 7, max 448, no infinities, 0x7F/0xFF NaN) with one e8m0 scale
// (a power of two 2^(e-127); 0xFF NaN) per 32 consecutive values, as in DeepSeek-V4.1.
// int8 is symmetric, one f32 scale per row: x = q * s, q in -127..127, s = max|x| / 127.
// int4 is symmetric, one f16 scale per 32 values: x = (nibble - 8) * s, nibble in 1..15, s the
// smallest f16 >= max|x| / 7; value 2i is the low nibble of byte i of a pair, 2i+1 the high one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace engram::base {

// On-disk codes; never renumber (schemas/table_format.md §dtype).
enum class DType : uint32_t { kF32 = 0, kBF16 = 1, kF16 = 2, kF8E4M3 = 3, kI8 = 4, kI4 = 5 };

inline constexpr uint32_t kFp8BlockSize = 32;  // values per e8m0 scale
inline constexpr uint32_t kI4BlockSize = 32;   // values per int4 f16 scale

// "f32", "bf16", "f16", "fp8-e4m3", "int8", "int4".
std::string_view DTypeName(DType t) noexcept;
// Accepts our names and the usual aliases: float32/fp32, bfloat16, float16/half/fp16,
// fp8/float8_e4m3/float8_e4m3fn/e4m3, i8/q8, i4/q4. nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name) noexcept;
bool IsValidDType(uint32_t code) noexcept;
// The integer dtypes (int8, int4): their rows are only meaningful with their scales.
inline bool IsIntDType(DType t) noexcept { return t == DType::kI8 || t == DType::kI4; }
// Values per scale block (fp8, int4: 32, the row's last block may be shorter; else 1).
uint32_t BlockSize(DType t) noexcept;
// Bytes of a row of n values (int4: two a byte, rounded up), and of its scales (fp8: one e8m0
// byte per block; int8: one f32; int4: one f16 per block; none for f32/bf16/f16).
uint64_t RowBytes(DType t, uint64_t n) noexcept;
uint64_t ScaleBytes(DType t, uint64_t n) noexcept;

// Scalar conversions. To-narrow conversions round to nearest even; fp8 saturates to +-448.
uint16_t FloatToBF16(float f) noexcept;
float BF16ToFloat(uint16_t h) noexcept;
uint16_t FloatToF16(float f) noexcept;
float F16ToFloat(uint16_t h) noexcept;
uint8_t FloatToE4M3(float f) noexcept;
float E4M3ToFloat(uint8_t q) noexcept;
float E8M0ToFloat(uint8_t e) noexcept;

// Encodes n floats into `out` (RowBytes bytes) and, for the scaled dtypes, `scales`
// (ScaleBytes bytes). Blocks are 32 values from the row's start; the last one may be shorter.
// fp8: each block's scale is the smallest power of two s with
// max|x|/s <= 448 (an all-zero block gets s = 1). int8/int4: see the top of this file; values
// beyond MaxFinite saturate. Round trips (schemas/table_format.md §4): |decode - x| <= s/2 for
// int8 (s = max|x|/127) and int4 (s its block's f16 scale, at most (max|x|/7)(1 + 2^-10)).
void EncodeRow(DType t, std::span<const float> in, uint8_t* out, uint8_t* scales) noexcept;
// Decodes n values (with their scales for the scaled dtypes) to floats.
void DecodeRow(DType t, const uint8_t* in, const uint8_t* scales, std::span<float> out) noexcept;
// Index of the first of n encoded values (with their scales) that decodes to Inf or NaN, or n
// when all are finite. Bit tests only, except blocks whose scale could overflow. For int8/int4
// with scales == nullptr, the values alone: always finite.
size_t FirstNonFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept;
// FirstNonFinite(...) == n, written to vectorize (no early exit): for whole-table scans.
bool AllFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept;
// fp8 in two passes, for scans that read values and scales apart: no value byte is a NaN code;
// every e8m0 scale is below 0xF0 (0xFF is NaN, and scales from 0xF0 up may overflow a value, so
// FirstNonFinite decides for their rows). Both true implies AllFinite.
bool Fp8ValuesFinite(const uint8_t* in, size_t n) noexcept;
bool Fp8ScalesBelowF0(const uint8_t* scales, size_t n_scales) noexcept;
// Any scaled dtype, as Fp8ScalesBelowF0: `bytes` bytes of whole scales, true when none can make
// its values non-finite (fp8: below 0xF0; int8: finite f32 below 2^121; int4: finite f16).
bool ScalesSafe(DType t, const uint8_t* scales, size_t bytes) noexcept;
// The largest finite magnitude a value of this dtype holds (fp8: after its block scale).
float MaxFinite(DType t) noexcept;

}  // namespace engram::base

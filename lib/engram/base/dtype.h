// Storage dtypes of table rows and checkpoint tensors, and exact conversions between them.
// fp8 is OCP e4m3fn (bias 7, max 448, no infinities, 0x7F/0xFF NaN) with one e8m0 scale
// (a power of two 2^(e-127); 0xFF NaN) per 32 consecutive values, as in DeepSeek-V4.1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace engram::base {

// On-disk codes; never renumber (schemas/table_format.md §dtype).
enum class DType : uint32_t { kF32 = 0, kBF16 = 1, kF16 = 2, kF8E4M3 = 3 };

inline constexpr uint32_t kFp8BlockSize = 32;  // values per e8m0 scale

// "f32", "bf16", "f16", "fp8-e4m3".
std::string_view DTypeName(DType t) noexcept;
// Accepts our names and the usual aliases: float32/fp32, bfloat16, float16/half/fp16,
// fp8/float8_e4m3/float8_e4m3fn/e4m3. nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name) noexcept;
bool IsValidDType(uint32_t code) noexcept;
// Bytes of one stored value (fp8: 1, excluding its share of the scale).
uint32_t DTypeSize(DType t) noexcept;

// Scalar conversions. To-narrow conversions round to nearest even; fp8 saturates to +-448.
uint16_t FloatToBF16(float f) noexcept;
float BF16ToFloat(uint16_t h) noexcept;
uint16_t FloatToF16(float f) noexcept;
float F16ToFloat(uint16_t h) noexcept;
uint8_t FloatToE4M3(float f) noexcept;
float E4M3ToFloat(uint8_t q) noexcept;
float E8M0ToFloat(uint8_t e) noexcept;

// Encodes n floats into `out` (n * DTypeSize bytes). For fp8, n must be a multiple of 32 and
// `scales` receives n/32 e8m0 bytes: each block's scale is the smallest power of two s with
// max|x|/s <= 448 (an all-zero block gets s = 1).
void EncodeRow(DType t, std::span<const float> in, uint8_t* out, uint8_t* scales) noexcept;
// Decodes n values (and for fp8 their n/32 scales) to floats.
void DecodeRow(DType t, const uint8_t* in, const uint8_t* scales, std::span<float> out) noexcept;
// Index of the first of n encoded values (fp8: with its n/32 scales) that decodes to Inf or NaN,
// or n when all are finite. Bit tests only, except fp8 blocks whose scale could overflow.
size_t FirstNonFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept;
// FirstNonFinite(...) == n, written to vectorize (no early exit): for whole-table scans.
bool AllFinite(DType t, const uint8_t* in, const uint8_t* scales, size_t n) noexcept;
// fp8 in two passes, for scans that read values and scales apart: no value byte is a NaN code;
// every e8m0 scale is below 0xF0 (0xFF is NaN, and scales from 0xF0 up may overflow a value, so
// FirstNonFinite decides for their rows). Both true implies AllFinite.
bool Fp8ValuesFinite(const uint8_t* in, size_t n) noexcept;
bool Fp8ScalesBelowF0(const uint8_t* scales, size_t n_scales) noexcept;
// The largest finite magnitude a value of this dtype holds (fp8: after its block scale).
float MaxFinite(DType t) noexcept;

}  // namespace engram::base

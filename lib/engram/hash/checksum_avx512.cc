// XXH3-64 compiled for AVX-512 (this file alone is built with -mavx512f); chosen at run time by
// checksum.cc only on CPUs that support it.
#include <cstddef>
#include <cstdint>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace engram::hash::detail {

uint64_t Checksum64Avx512(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }

}  // namespace engram::hash::detail

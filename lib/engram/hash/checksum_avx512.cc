// XXH3-64 compiled for AVX-512 (this file alone is built with -mavx512f); chosen at run time by
// checksum.cc only on CPUs that support it.
#include <cstddef>
#include <cstdint>

#define XXH_INLINE_ALL
// GCC 12 warns, wrongly, that the inlined streaming update reads an uninitialised vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xxhash.h>
#pragma GCC diagnostic pop

namespace engram::hash::detail {

uint64_t Checksum64Avx512(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }
uint64_t Checksum64SeededAvx512(const void* data, size_t n, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, n, seed);
}

// state: an XXH3_state_t (the same layout in every build of the header).
void Checksum64UpdateAvx512(void* state, const void* data, size_t n) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, n);
}

}  // namespace engram::hash::detail

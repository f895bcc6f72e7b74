// XXH3 wrappers; together with ngram_hash.cc and checksum_avx2.cc the only includers of xxhash.h.
// Bulk checksums dispatch at run time to an AVX-512 or AVX2 build of XXH3 when the CPU has it
// (about twice the SSE2 speed each step, as xxhsum's own dispatch does); the results are
// identical by XXH3's definition.
#include "engram/hash/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace engram::hash {

namespace detail {
#if defined(__x86_64__)
uint64_t Checksum64Avx2(const void* data, size_t n) noexcept;
uint64_t Checksum64Avx512(const void* data, size_t n) noexcept;
void Checksum64UpdateAvx2(void* state, const void* data, size_t n) noexcept;
uint64_t Checksum64SeededAvx2(const void* data, size_t n, uint64_t seed) noexcept;
uint64_t Checksum64SeededAvx512(const void* data, size_t n, uint64_t seed) noexcept;
void Checksum64UpdateAvx512(void* state, const void* data, size_t n) noexcept;
#endif
}  // namespace detail

namespace {

uint64_t Checksum64Generic(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }
void UpdateGeneric(void* state, const void* data, size_t n) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, n);
}
uint64_t SeededGeneric(const void* data, size_t n, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, n, seed);
}

// One build of each entry point, chosen once for this CPU.
struct Builds {
  uint64_t (*bulk)(const void*, size_t) noexcept;
  void (*update)(void*, const void*, size_t) noexcept;
  uint64_t (*seeded)(const void*, size_t, uint64_t) noexcept;
};
Builds Pick() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return {detail::Checksum64Avx512, detail::Checksum64UpdateAvx512,
            detail::Checksum64SeededAvx512};
  if (__builtin_cpu_supports("avx2"))
    return {detail::Checksum64Avx2, detail::Checksum64UpdateAvx2, detail::Checksum64SeededAvx2};
#endif
  return {Checksum64Generic, UpdateGeneric, SeededGeneric};
}
const Builds kBuilds = Pick();

}  // namespace

uint64_t Checksum64(const void* data, size_t n) noexcept {
  // Short inputs do not amortise the indirect call and gain nothing from wider vectors.
  if (n < 1024) return XXH3_64bits(data, n);
  return kBuilds.bulk(data, n);
}

uint64_t Checksum64Seeded(const void* data, size_t n, uint64_t seed) noexcept {
  // Journal records (~0.5-2 KiB) already gain from the wider builds.
  if (n <= 240) return XXH3_64bits_withSeed(data, n, seed);
  return kBuilds.seeded(data, n, seed);
}

struct Checksum64Stream::State {
  XXH3_state_t s;
};

Checksum64Stream::Checksum64Stream() : state_(std::make_unique<State>()) { Reset(); }

void Checksum64Stream::Reset() noexcept { XXH3_64bits_reset(&state_->s); }
Checksum64Stream::~Checksum64Stream() = default;

void Checksum64Stream::Update(const void* data, size_t n) noexcept {
  if (n < 1024)
    XXH3_64bits_update(&state_->s, data, n);
  else
    kBuilds.update(&state_->s, data, n);
}

uint64_t Checksum64Stream::Digest() const noexcept { return XXH3_64bits_digest(&state_->s); }

}  // namespace engram::hash

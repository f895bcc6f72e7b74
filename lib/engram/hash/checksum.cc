// XXH3 wrappers; together with ngram_hash.cc the only includers of xxhash.h.
#include "engram/hash/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace engram::hash {

uint64_t Checksum64(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }

uint64_t Checksum64Seeded(const void* data, size_t n, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, n, seed);
}

struct Checksum64Stream::State {
  XXH3_state_t s;
};

Checksum64Stream::Checksum64Stream() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(&state_->s);
}
Checksum64Stream::~Checksum64Stream() = default;

void Checksum64Stream::Update(const void* data, size_t n) noexcept {
  XXH3_64bits_update(&state_->s, data, n);
}

uint64_t Checksum64Stream::Digest() const noexcept { return XXH3_64bits_digest(&state_->s); }

}  // namespace engram::hash

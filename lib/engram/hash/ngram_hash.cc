// XXH3-based native n-gram hashing (spec: schemas/table_format.md §4.1).
#include "engram/hash/ngram_hash.h"

#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace engram::hash {

uint64_t SubtableSeed(uint64_t table_seed, uint32_t layer_id, uint32_t order,
                      uint32_t head) noexcept {
  uint8_t buf[12];
  std::memcpy(buf, &layer_id, 4);
  std::memcpy(buf + 4, &order, 4);
  std::memcpy(buf + 8, &head, 4);
  return XXH3_64bits_withSeed(buf, sizeof buf, table_seed);
}

uint64_t NgramHash(const uint32_t* ids, uint32_t n, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(ids, static_cast<size_t>(n) * 4, seed);
}

uint64_t OwnerTagSeed(uint64_t table_seed) noexcept {
  static const char kLabel[] = "engram.owner-tag.v1";
  return XXH3_64bits_withSeed(kLabel, sizeof kLabel - 1, table_seed);
}

uint32_t OwnerTag(const uint32_t* ids, uint32_t n, uint64_t tag_seed) noexcept {
  uint32_t t = static_cast<uint32_t>(NgramHash(ids, n, tag_seed) >> 32);
  return t == kNoOwner ? 1u : t;
}

const uint8_t* Xxh3Secret() noexcept { return XXH3_kSecret; }

}  // namespace engram::hash

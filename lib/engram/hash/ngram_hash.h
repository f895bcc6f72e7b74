// Native addressing primitives: per-(layer, order, head) seeds, n-gram hashes and owner tags.
// Normative definition: schemas/table_format.md §4.1. Any change to an output of this file is
// a format break (version_major bump + new golden files).
#pragma once

#include <cstdint>

namespace engram::hash {

// Seed of sub-table (layer_id, order, head): XXH3-64 of the 12 bytes
// LE32(layer_id) || LE32(order) || LE32(head), seeded with the table seed.
uint64_t SubtableSeed(uint64_t table_seed, uint32_t layer_id, uint32_t order,
                      uint32_t head) noexcept;

// XXH3-64 of the n-gram's canonical ids as n little-endian u32, oldest first, with `seed`.
uint64_t NgramHash(const uint32_t* ids, uint32_t n, uint64_t seed) noexcept;

// Seed of owner tags: XXH3-64 of the ASCII bytes "engram.owner-tag.v1" seeded with the table seed.
uint64_t OwnerTagSeed(uint64_t table_seed) noexcept;

// Owner tag of an n-gram: the high 32 bits of NgramHash(ids, n, OwnerTagSeed) with 0 mapped to 1
// (0 marks a row without owner). Independent of layer and head: it names the n-gram itself.
uint32_t OwnerTag(const uint32_t* ids, uint32_t n, uint64_t tag_seed) noexcept;

inline constexpr uint32_t kNoOwner = 0;

// XXH3's 192-byte default secret (for xxh3_short.h, e.g. copied to CUDA constant memory).
const uint8_t* Xxh3Secret() noexcept;

}  // namespace engram::hash

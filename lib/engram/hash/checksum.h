// XXH3-64 checksums of byte ranges, one-shot and streaming (the file formats' checksum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace engram::hash {

// XXH3-64 with seed 0, identical to `xxhsum -H3`.
uint64_t Checksum64(const void* data, size_t n) noexcept;
inline uint64_t Checksum64(std::span<const uint8_t> b) noexcept {
  return Checksum64(b.data(), b.size());
}
// XXH3-64 with an explicit seed.
uint64_t Checksum64Seeded(const void* data, size_t n, uint64_t seed) noexcept;

// Incremental XXH3-64 over pieces; Digest() equals Checksum64 of their concatenation.
class Checksum64Stream {
 public:
  Checksum64Stream();
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;
  void Update(const void* data, size_t n) noexcept;  // AVX2/AVX-512 where the CPU has it
  void Reset() noexcept;                             // as newly made
  uint64_t Digest() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace engram::hash

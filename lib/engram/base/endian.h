// Little-endian load/store of fixed-width integers and floats, for every on-disk field.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

static_assert(std::endian::native == std::endian::little,
              "engramctl's file formats are little-endian and this build assumes a little-endian "
              "host; big-endian hosts are not supported");

namespace engram::base {

template <typename T>
inline T LoadLE(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void StoreLE(void* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

// Appends fixed-width little-endian values to a byte string (used by writers of small
// metadata sections).
class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    size_t at = buf_.size();
    buf_.resize(at + sizeof(T));
    StoreLE<T>(buf_.data() + at, v);
  }
  void PutBytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void PadTo(size_t alignment) {
    while (buf_.size() % alignment) buf_.push_back(0);
  }
  size_t size() const noexcept { return buf_.size(); }
  const std::basic_string<uint8_t>& bytes() const noexcept { return buf_; }
  std::basic_string<uint8_t>& bytes() noexcept { return buf_; }

 private:
  std::basic_string<uint8_t> buf_;
};

}  // namespace engram::base

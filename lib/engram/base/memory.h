// Large zero-filled working memory straight from the kernel: fresh anonymous pages are already
// zero (no memset over gigabytes), and big blocks are advised onto transparent huge pages, which
// cuts page faults and TLB misses for random access (hash tables, counters).
#pragma once

#include <cstddef>
#include <cstdint>

namespace engram::base {

class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  explicit ZeroedBuffer(size_t bytes);
  ~ZeroedBuffer();
  ZeroedBuffer(ZeroedBuffer&& o) noexcept;
  ZeroedBuffer& operator=(ZeroedBuffer&& o) noexcept;
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;

  void* data() const noexcept { return p_; }
  size_t size() const noexcept { return bytes_; }
  // Sets every byte to zero again.
  void Zero() noexcept;
  // Sets bytes [off, off + n) to zero again. A mapped buffer gives their whole pages back to the
  // kernel, so they stop counting as resident memory until they are written again.
  void ZeroRange(size_t off, size_t n) noexcept;
  // Grows the buffer to `bytes` (>= size()), keeping its contents; the added bytes are zero. A
  // mapped buffer is remapped, not copied, so growing holds no second copy of the old bytes.
  void Grow(size_t bytes);

 private:
  void Release() noexcept;
  void* p_ = nullptr;
  size_t bytes_ = 0;  // from mmap when large, else calloc (memory.cc)
};

}  // namespace engram::base

// ZeroedBuffer: calloc below 2 MiB, anonymous mmap + MADV_HUGEPAGE above.
#include "engram/base/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace engram::base {

namespace {
constexpr size_t kMapAbove = size_t{2} << 20;
}

ZeroedBuffer::ZeroedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kMapAbove) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: fine if the kernel declines
#endif
    p_ = p;
  } else {
    p_ = std::calloc(bytes, 1);
    if (!p_) throw std::bad_alloc();
  }
}

ZeroedBuffer::~ZeroedBuffer() { Release(); }

ZeroedBuffer::ZeroedBuffer(ZeroedBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

ZeroedBuffer& ZeroedBuffer::operator=(ZeroedBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void ZeroedBuffer::Zero() noexcept {
  if (p_) std::memset(p_, 0, bytes_);
}

void ZeroedBuffer::ZeroRange(size_t off, size_t n) noexcept {
  if (!p_ || n == 0) return;
  auto* b = static_cast<uint8_t*>(p_);
  if (bytes_ < kMapAbove) {
    std::memset(b + off, 0, n);
    return;
  }
  static const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t lo = std::min(off + n, (off + kPage - 1) / kPage * kPage);
  const size_t hi = std::max(lo, (off + n) / kPage * kPage);
  std::memset(b + off, 0, lo - off);
  // Private anonymous pages read as zeros after MADV_DONTNEED; where the advice fails, write them.
  if (hi > lo && ::madvise(b + lo, hi - lo, MADV_DONTNEED) != 0) std::memset(b + lo, 0, hi - lo);
  std::memset(b + hi, 0, off + n - hi);
}

void ZeroedBuffer::Grow(size_t bytes) {
  if (bytes <= bytes_) return;
  if (bytes_ >= kMapAbove) {
    // The kernel moves the page tables; the pages past the old end are new, hence zero.
    void* p = ::mremap(p_, bytes_, bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    p_ = p;
    bytes_ = bytes;
    return;
  }
  ZeroedBuffer bigger(bytes);  // small: a copy is cheap
  if (bytes_) std::memcpy(bigger.p_, p_, bytes_);
  *this = std::move(bigger);
}

void ZeroedBuffer::Release() noexcept {
  if (!p_) return;
  if (bytes_ >= kMapAbove)
    ::munmap(p_, bytes_);
  else
    std::free(p_);
  p_ = nullptr;
  bytes_ = 0;
}

}  // namespace engram::base

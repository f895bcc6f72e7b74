// ZSTD_CStream / ZSTD_DStream wrappers over file descriptors.
#include "engram/builder/zstd_stream.h"

#include <fcntl.h>
#include <zstd.h>

#include <cstring>
#include <vector>

#include "engram/base/error.h"

namespace engram::builder {

struct ZstdWriter::Impl {
  ZSTD_CStream* cs = nullptr;
  std::vector<uint8_t> out;
  ~Impl() {
    if (cs) ZSTD_freeCStream(cs);
  }
};

ZstdWriter::ZstdWriter(const std::string& path, int level)
    : path_(path), impl_(std::make_unique<Impl>()) {
  fd_ = base::OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  impl_->cs = ZSTD_createCStream();
  ENGRAM_CHECK(impl_->cs != nullptr, Code::kInternal, "ZSTD_createCStream failed");
  ZSTD_initCStream(impl_->cs, level);
  impl_->out.resize(ZSTD_CStreamOutSize());
}

ZstdWriter::~ZstdWriter() = default;

void ZstdWriter::Write(const void* data, size_t n) {
  ZSTD_inBuffer in{data, n, 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer o{impl_->out.data(), impl_->out.size(), 0};
    size_t r = ZSTD_compressStream(impl_->cs, &o, &in);
    ENGRAM_CHECK(!ZSTD_isError(r), Code::kInternal, "zstd: " << ZSTD_getErrorName(r));
    base::PwriteFull(fd_.get(), impl_->out.data(), o.pos, written_, path_);
    written_ += o.pos;
  }
}

void ZstdWriter::Close(bool fsync) {
  size_t r;
  do {
    ZSTD_outBuffer o{impl_->out.data(), impl_->out.size(), 0};
    r = ZSTD_endStream(impl_->cs, &o);
    ENGRAM_CHECK(!ZSTD_isError(r), Code::kInternal, "zstd: " << ZSTD_getErrorName(r));
    base::PwriteFull(fd_.get(), impl_->out.data(), o.pos, written_, path_);
    written_ += o.pos;
  } while (r != 0);
  if (fsync) base::Fsync(fd_.get(), path_);
  fd_.Close(path_);
}

struct ZstdReader::Impl {
  ZSTD_DStream* ds = nullptr;
  std::vector<uint8_t> in;
  ZSTD_inBuffer ib{nullptr, 0, 0};
  uint64_t file_off = 0;
  bool eof = false;
  ~Impl() {
    if (ds) ZSTD_freeDStream(ds);
  }
};

ZstdReader::ZstdReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  fd_ = base::OpenFile(path, O_RDONLY);
  base::RegularFileSize(fd_.get(), path);
  impl_->ds = ZSTD_createDStream();
  ENGRAM_CHECK(impl_->ds != nullptr, Code::kInternal, "ZSTD_createDStream failed");
  ZSTD_initDStream(impl_->ds);
  impl_->in.resize(ZSTD_DStreamInSize());
  impl_->ib = {impl_->in.data(), 0, 0};
}

ZstdReader::~ZstdReader() = default;

size_t ZstdReader::Read(void* out, size_t n) {
  Impl& m = *impl_;
  ZSTD_outBuffer ob{out, n, 0};
  while (ob.pos < ob.size) {
    if (m.ib.pos == m.ib.size) {
      if (m.eof) break;
      size_t got = base::PreadSome(fd_.get(), m.in.data(), m.in.size(), m.file_off, path_);
      m.file_off += got;
      m.ib = {m.in.data(), got, 0};
      if (got == 0) {
        m.eof = true;
        break;
      }
    }
    size_t r = ZSTD_decompressStream(m.ds, &ob, &m.ib);
    ENGRAM_CHECK(!ZSTD_isError(r), Code::kCorrupt,
                 path_ << ": not a valid zstd stream: " << ZSTD_getErrorName(r));
  }
  return ob.pos;
}

void ZstdReader::ReadExact(void* out, size_t n) {
  size_t got = Read(out, n);
  ENGRAM_CHECK(got == n, Code::kCorrupt, path_ << ": truncated (the stream ended early)");
}

}  // namespace engram::builder

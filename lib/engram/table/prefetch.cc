// Page-cache residency: mincore scans, parallel warm-up of missing ranges, mlock, fadvise.
#include "engram/table/prefetch.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/format/format.h"
#include "engram/format/reader.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace engram::table {

namespace {

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// Residency of every page. mincore over pages this process never touched walks the page cache
// page by page (~100 ms per 4 GiB), so large files are scanned in parallel slices.
std::vector<unsigned char> Mincore(const uint8_t* base, uint64_t len, const std::string& path,
                                   int threads = 0) {
  std::vector<unsigned char> v((len + kPage - 1) / kPage);
  if (len == 0) return v;
  const uint64_t slice = 256ull << 20;
  const int64_t slices = static_cast<int64_t>((len + slice - 1) / slice);
  if (threads <= 0) threads = omp_get_max_threads();
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(| : failed)
  for (int64_t i = 0; i < slices; ++i) {
    uint64_t off = static_cast<uint64_t>(i) * slice;
    if (::mincore(const_cast<uint8_t*>(base) + off, std::min(slice, len - off),
                  v.data() + off / kPage) != 0)
      failed |= 1;
  }
  if (failed) ENGRAM_THROW(Code::kIo, path << ": mincore failed: " << std::strerror(errno));
  return v;
}

// Pages of [off, off + len) in the page cache, by cachestat(2) (Linux >= 6.5): one call instead of
// a mincore walk (which costs ~3 ms per GiB even when everything is resident). nullopt where the
// kernel lacks it.
std::optional<uint64_t> CachedPages(int fd, uint64_t len, uint64_t off = 0) {
#if defined(__x86_64__)
  constexpr long kSysCachestat = 451;
  struct {
    uint64_t off, len;
  } range{off, len};
  struct {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } cs{};
  if (::syscall(kSysCachestat, fd, &range, &cs, 0) == 0) return cs.nr_cache;
#endif
  (void)fd;
  (void)len;
  (void)off;
  return std::nullopt;
}

// Bytes of file pages this process maps with PMD entries (/proc/self/smaps_rollup FilePmdMapped):
// non-zero once the page cache holds 2 MiB folios of a mapped file. 0 where unknown.
uint64_t FilePmdMappedBytes() {
  base::UniqueFd fd(::open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return 0;
  char buf[4096];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* k = std::strstr(buf, "FilePmdMapped:");
  return k ? std::strtoull(k + 14, nullptr, 10) << 10 : 0;
}

uint64_t ResidentIn(const std::vector<unsigned char>& pages, uint64_t offset, uint64_t len,
                    uint64_t file_len) {
  if (len == 0) return 0;
  uint64_t first = offset / kPage, last = (std::min(offset + len, file_len) - 1) / kPage;
  uint64_t n = 0;
  for (uint64_t p = first; p <= last && p < pages.size(); ++p)
    if (pages[p] & 1) {
      uint64_t a = std::max(offset, p * kPage),
               b = std::min({offset + len, (p + 1) * kPage, file_len});
      n += b - a;
    }
  return n;
}

// Brings [off, off + n) of a file into the page cache. sendfile(2) to /dev/null reads the pages
// into the cache without copying them out (cold 1 GiB: 0.052 s against 0.08 s for pread into a
// small buffer and 0.10-0.9 s for `vmtouch -t`, 2 threads). Where the file system cannot splice,
// pread into a small buffer that stays in cache (as `cat` does; faulting through the mapping is
// ~3x slower in 4 KiB pages; see Warm for 2 MiB folios).
class ChunkReader {
 public:
  ChunkReader(int fd, const std::string& path)
      : fd_(fd), path_(path), null_(::open("/dev/null", O_WRONLY | O_CLOEXEC)) {}

  void Read(uint64_t off, uint64_t n) {
    const uint64_t end = off + n;
    if (null_.valid()) {
      off_t o = static_cast<off_t>(off);
      while (static_cast<uint64_t>(o) < end) {
        ssize_t r = ::sendfile(null_.get(), fd_, &o, end - static_cast<uint64_t>(o));
        if (r > 0) continue;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return;  // the file shrank under us: nothing left to read
        if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
          ENGRAM_THROW(Code::kIo, path_ << ": read failed: " << std::strerror(errno));
        null_ = base::UniqueFd();  // no splice here: read the rest through a buffer
        break;
      }
      off = static_cast<uint64_t>(o);
    }
    constexpr uint64_t kBlock = 256ull << 10;
    buf_.resize(kBlock);
    for (uint64_t k = off; k < end; k += kBlock)
      base::PreadFull(fd_, buf_.data(), std::min(kBlock, end - k), k, path_);
  }

 private:
  int fd_;
  const std::string& path_;
  base::UniqueFd null_;
  std::vector<uint8_t> buf_;
};

}  // namespace

namespace {

// A table's residency as it was before we looked: the page map is taken first, then the header
// is validated with a 4 KiB read (no readahead), and its page dropped again if it was not
// resident, so that neither --status nor --evict faults the table in.
struct Probe {
  base::UniqueFd fd;
  uint64_t len = 0;
  base::MappedFile map;
  std::vector<unsigned char> pages;
  format::Header header;
};

Probe OpenProbe(const std::string& path) {
  Probe p;
  p.fd = base::OpenFile(path, O_RDONLY);
  p.len = base::RegularFileSize(p.fd.get(), path);
  ::posix_fadvise(p.fd.get(), 0, 0, POSIX_FADV_RANDOM);
  if (p.len >= format::kHeaderSize) {
    p.map = base::MappedFile::FromFd(p.fd.get(), p.len, base::MappedFile::Mode::kReadOnly, path);
    p.pages = Mincore(p.map.data(), p.len, path);
  }
  p.header = format::ReadValidatedHeader(p.fd.get(), path, p.len);  // a table, or a clear error
  if (!p.pages.empty() && !(p.pages[0] & 1))
    ::posix_fadvise(p.fd.get(), 0, format::kHeaderSize, POSIX_FADV_DONTNEED);
  return p;
}

Residency FromPages(const std::string& path, const Probe& p) {
  Residency r;
  r.path = path;
  r.bytes = p.len;
  r.resident_bytes = ResidentIn(p.pages, 0, p.len, p.len);
  const format::Header& h = p.header;
  r.parts.push_back(
      {"header", 0, format::kHeaderSize, ResidentIn(p.pages, 0, format::kHeaderSize, p.len)});
  for (uint32_t i = 0; i < h.n_sections; ++i) {
    const format::SectionEntry& e = h.sections[i];
    r.parts.push_back({std::string(format::SectionName(e.type)), e.offset, e.size,
                       ResidentIn(p.pages, e.offset, e.size, p.len)});
  }
  if (p.len > h.file_size)
    r.parts.push_back({"journal", h.file_size, p.len - h.file_size,
                       ResidentIn(p.pages, h.file_size, p.len - h.file_size, p.len)});
  return r;
}

}  // namespace

Residency Status(const std::string& path) {
  Probe p = OpenProbe(path);
  return FromPages(path, p);
}

WarmResult Warm(const std::string& path, int threads, base::Reporter& reporter) {
  base::Stopwatch sw;
  format::Reader::Open(
      path, format::OpenOptions{true, true});  // refuse anything that is not a readable table
  WarmResult res;
  base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
  const uint64_t len = base::RegularFileSize(fd.get(), path);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger readahead window
  res.bytes = len;
  base::MappedFile m =
      base::MappedFile::FromFd(fd.get(), len, base::MappedFile::Mode::kReadOnly, path);
  if (len == 0) return res;
  const auto cached = CachedPages(fd.get(), len);
  if (cached && *cached == (len + kPage - 1) / kPage) {
    res.already_resident = res.resident = len;  // warm: nothing to scan or read
    res.seconds = sw.Seconds();
    return res;
  }
  if (threads <= 0) threads = std::max(2, omp_get_max_threads());
  // Runs of missing pages, cut into chunks that threads take in file order. A mostly cold file
  // needs no page-by-page scan: reading its few cached pages again through sendfile costs less
  // (1 GiB: ~11 ms cached, against ~10 ms to scan it with mincore), so it is read whole. Reading
  // the header has already cached a few pages.
  const uint64_t kChunk = 16ull << 20;
  const uint64_t n_pages = (len + kPage - 1) / kPage;
  const bool scan = !cached || *cached >= n_pages / 4;
  std::vector<std::pair<uint64_t, uint64_t>> chunks;
  if (scan) {
    auto pages = Mincore(m.data(), len, path, threads);
    res.already_resident = ResidentIn(pages, 0, len, len);
    for (uint64_t p = 0; p < pages.size();) {
      if (pages[p] & 1) {
        ++p;
        continue;
      }
      uint64_t q = p;
      while (q < pages.size() && !(pages[q] & 1) && (q - p) * kPage < kChunk) ++q;
      chunks.emplace_back(p * kPage, std::min(q * kPage, len) - p * kPage);
      p = q;
    }
  } else {
    res.already_resident = std::min(len, *cached * kPage);
    for (uint64_t off = 0; off < len; off += kChunk)
      chunks.emplace_back(off, std::min(kChunk, len - off));
  }
  for (const auto& c : chunks) res.read_bytes += c.second;
  if (!scan) res.read_bytes -= res.already_resident;  // those pages were passed over, not read
  // Where the file system keeps large folios in the page cache (ext4 since Linux 6.16, xfs,
  // tmpfs), a mapping marked MADV_HUGEPAGE is read ahead in 2 MiB folios, and populating it costs
  // less per byte than sendfile's 4 KiB pages (1 GiB cold on this project's VM: 44-48 ms with 4
  // threads against 47-67 ms). The first chunk tells: when it did not come in as 2 MiB folios,
  // the rest goes through sendfile, whose readahead is faster than 4 KiB page faults. The loop
  // below takes the first chunk again, finds it in cache, and counts it with the others.
  bool populate = false;
  if (!chunks.empty() && ::madvise(const_cast<uint8_t*>(m.data()), len, MADV_HUGEPAGE) == 0 &&
      ::madvise(const_cast<uint8_t*>(m.data()) + chunks[0].first, chunks[0].second,
                MADV_POPULATE_READ) == 0) {
    populate = FilePmdMappedBytes() > 0;
    if (populate) threads = std::max(threads, 4);  // more folios in flight; the cores mostly wait
  }
  // Unscanned, the chunks cover the whole file, and each counts its own resident pages.
  std::atomic<uint64_t> resident{scan ? res.already_resident : 0};
  std::atomic<size_t> next{0};
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    try {
      std::vector<unsigned char> vec;
      ChunkReader reader(fd.get(), path);
      for (size_t i = next.fetch_add(1); i < chunks.size(); i = next.fetch_add(1)) {
        auto [off, n] = chunks[i];
        uint8_t* p = const_cast<uint8_t*>(m.data()) + off;
        if (!populate || ::madvise(p, n, MADV_POPULATE_READ) != 0) reader.Read(off, n);
        uint64_t now = 0;
        if (auto c = CachedPages(fd.get(), n, off)) {
          now = std::min(n, *c * kPage);  // chunks start on a page; only the file's last is short
        } else {
          vec.resize((n + kPage - 1) / kPage);
          if (::mincore(p, n, vec.data()) == 0)
            for (size_t k = 0; k < vec.size(); ++k)
              if (vec[k] & 1) now += std::min(kPage, n - k * kPage);
        }
        // Resident in the page cache is the point; mapped into this process it need not stay
        // (a table larger than memory would otherwise count whole in prefetch's RSS).
        if (populate) base::ReleaseMappedPages(p, n);
        uint64_t total = resident.fetch_add(now) + now;
        if (omp_get_thread_num() == 0) reporter.Progress("prefetch", total, len, "bytes");
      }
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  reporter.ProgressDone("prefetch");
  // Each chunk was re-checked after it was read: no second scan of the whole file.
  res.resident = resident.load();
  res.seconds = sw.Seconds();
  return res;
}

BudgetResult WarmHottest(const std::string& path, uint64_t budget, int threads,
                         base::Reporter& reporter, std::span<const uint64_t> hot_rows) {
  base::Stopwatch sw;
  BudgetResult res;
  res.budget = budget;
  auto r = format::Reader::Open(path, format::OpenOptions{true, true});
  const format::Header& h = r->header();
  const format::SectionEntry* rows = r->FindSection(format::SectionType::kRows);
  const format::SectionEntry* stats = r->FindSection(format::SectionType::kStats);
  res.from_trace = !hot_rows.empty();
  ENGRAM_CHECK(
      res.from_trace || (stats && stats->size), Code::kInvalidArgument,
      path << ": --budget ranks rows by the build corpus's counts (STATS), and this table "
              "has none (built with --no-stats); warm it whole (prefetch without --budget)");
  base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
  res.bytes = base::RegularFileSize(fd.get(), path);
  // No readahead: exactly the chosen pages come in.
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
  // 1. What every lookup reads whatever its row: the header and slot page, the metadata, the
  // owner tags, the fp8 scales; in that order while the budget lasts.
  std::vector<std::pair<uint64_t, uint64_t>> want;
  uint64_t left = budget;
  auto take = [&](uint64_t off, uint64_t len) {
    len = std::min(len, left);
    if (len == 0) return;
    want.emplace_back(off, len);
    left -= len;
    res.always_bytes += len;
  };
  take(0, std::min<uint64_t>(res.bytes, format::kHeaderSize + format::kCommitSlotsBytes));
  for (uint32_t i = 0; i < h.n_sections; ++i)
    if (h.sections[i].flags & format::kSectionMetadata)
      take(h.sections[i].offset, h.sections[i].size);
  for (auto t : {format::SectionType::kTags, format::SectionType::kScales})
    if (const format::SectionEntry* e = r->FindSection(t)) take(e->offset, e->size);
  // 2. ROWS pages by heat: the lookups of the build corpus that land on their rows.
  const uint64_t stride = h.row_stride;
  const uint64_t n_pages = (rows->size + kPage - 1) / kPage;
  res.row_pages_total = n_pages;
  std::vector<uint64_t> heat(n_pages, 0);
  // A row across a page boundary heats both pages.
  auto heat_row = [&](uint64_t row, uint64_t count) {
    for (uint64_t p = row * stride / kPage; p <= ((row + 1) * stride - 1) / kPage; ++p)
      heat[p] += count;
  };
  if (res.from_trace) {
    for (uint64_t row : hot_rows)
      if (row < h.total_rows) heat_row(row, 1);
  } else {
    // STATS is streamed (16 bytes a row): a table larger than memory is never mapped whole.
    constexpr uint64_t kBlockRows = 1 << 16;
    std::vector<uint8_t> buf(kBlockRows * format::kStatsRowSize);
    for (uint64_t r0 = 0; r0 < h.total_rows; r0 += kBlockRows) {
      const uint64_t n = std::min(kBlockRows, h.total_rows - r0);
      base::PreadFull(fd.get(), buf.data(), n * format::kStatsRowSize,
                      stats->offset + r0 * format::kStatsRowSize, path);
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t count = base::LoadLE<uint32_t>(buf.data() + k * format::kStatsRowSize + 4);
        if (!count) continue;
        heat_row(r0 + k, count);
      }
      reporter.Progress("rank rows", r0 + n, h.total_rows, "rows");
    }
    ::posix_fadvise(fd.get(), static_cast<off_t>(stats->offset), static_cast<off_t>(stats->size),
                    POSIX_FADV_DONTNEED);  // read to rank, not to keep
    reporter.ProgressDone("rank rows");
  }
  std::vector<uint32_t> order;
  order.reserve(n_pages);
  for (uint64_t p = 0; p < n_pages; ++p)
    if (heat[p]) order.push_back(static_cast<uint32_t>(p));
  const uint64_t fit = std::min<uint64_t>(order.size(), left / kPage);
  std::partial_sort(
      order.begin(), order.begin() + static_cast<int64_t>(fit), order.end(),
      [&](uint32_t a, uint32_t b) { return heat[a] != heat[b] ? heat[a] > heat[b] : a < b; });
  order.resize(fit);
  std::sort(order.begin(), order.end());
  uint64_t chosen_heat = 0;
  for (uint32_t p : order) {
    const uint64_t off = rows->offset + uint64_t{p} * kPage;
    if (!want.empty() && want.back().first + want.back().second == off)
      want.back().second += kPage;
    else
      want.emplace_back(off, kPage);
    chosen_heat += heat[p];
  }
  res.row_pages = order.size();
  // Pages hold several rows, and a row can straddle two pages: the share is of page heat.
  uint64_t heat_sum = 0;
  for (uint64_t x : heat) heat_sum += x;
  res.lookup_share =
      heat_sum ? static_cast<double>(chosen_heat) / static_cast<double>(heat_sum) : 0;
  std::sort(want.begin(), want.end());
  // 3. Read them, in file order, with parallel readers.
  if (threads <= 0) threads = std::max(2, omp_get_max_threads());
  std::atomic<uint64_t> done{0};
  std::atomic<size_t> next{0};
  uint64_t total = 0;
  for (const auto& w : want) total += w.second;
  // The row pages are scattered: a reader waiting on one page at a time keeps the disk at a
  // queue depth of the reader count. Read-ahead is asked for a window of ranges ahead of the
  // readers (POSIX_FADV_WILLNEED starts the reads without waiting), so the disk serves many at
  // once and the readers find them in the page cache. On a 6.4 GiB table, --budget 1G (192K row
  // pages), 2 readers, cold: 4.2-5.0 s, against 12-14 s without the window.
  constexpr size_t kAhead = 1024;
  std::atomic<size_t> advised{0};
  std::mutex advise_mu;
  auto advise_to = [&](size_t upto) {
    upto = std::min(upto, want.size());
    if (advised.load() >= upto) return;
    std::lock_guard<std::mutex> lock(advise_mu);
    for (size_t k = advised.load(); k < upto; ++k)
      ::posix_fadvise(fd.get(), static_cast<off_t>(want[k].first),
                      static_cast<off_t>(want[k].second), POSIX_FADV_WILLNEED);
    advised.store(std::max(advised.load(), upto));
  };
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    try {
      ChunkReader reader(fd.get(), path);
      for (size_t i = next.fetch_add(1); i < want.size(); i = next.fetch_add(1)) {
        if (advised.load() < i + kAhead / 2) advise_to(i + kAhead);
        reader.Read(want[i].first, want[i].second);
        const uint64_t d = done.fetch_add(want[i].second) + want[i].second;
        if (omp_get_thread_num() == 0) reporter.Progress("prefetch", d, total, "bytes");
      }
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  reporter.ProgressDone("prefetch");
  res.warmed_bytes = total;
  res.ranges = std::move(want);
  res.seconds = sw.Seconds();
  return res;
}

void CheckLockable(const std::string& path, uint64_t bytes) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || ::geteuid() == 0)
    return;  // root has CAP_IPC_LOCK
  ENGRAM_CHECK(
      bytes <= rl.rlim_cur, Code::kIo,
      path << ": --lock needs " << base::FormatBytes(bytes)
           << " locked in memory, above the memlock limit of " << base::FormatBytes(rl.rlim_cur)
           << "; raise it with 'ulimit -l unlimited' (or LimitMEMLOCK= in a systemd unit), "
              "lock less with --budget SIZE, or run as root");
}

uint64_t Evict(const std::string& path) {
  Probe p = OpenProbe(path);
  int r = ::posix_fadvise(p.fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  ENGRAM_CHECK(r == 0, Code::kIo, path << ": posix_fadvise(DONTNEED) failed: " << std::strerror(r));
  if (p.len < format::kHeaderSize) return 0;
  return ResidentIn(Mincore(p.map.data(), p.len, path), 0, p.len, p.len);
}

ResidentLock::ResidentLock(const std::string& path)
    : ResidentLock(path, std::vector<std::pair<uint64_t, uint64_t>>{}) {}

ResidentLock::ResidentLock(const std::string& path,
                           const std::vector<std::pair<uint64_t, uint64_t>>& ranges)
    : map_(base::MappedFile::Open(path)), ranges_(ranges) {
  if (map_.size() == 0) return;
  if (ranges_.empty()) ranges_.emplace_back(0, map_.size());
  uint64_t want = 0;
  for (const auto& r : ranges_) want += r.second;
  size_t locked = 0;
  int failure = 0;
  for (; locked < ranges_.size(); ++locked) {
    const auto [off, len] = ranges_[locked];
    const uint64_t a = off / kPage * kPage, b = std::min<uint64_t>(map_.size(), off + len);
    if (b <= a) continue;
    if (::mlock(map_.data() + a, b - a) != 0) {
      failure = errno;
      break;
    }
    locked_ += len;
  }
  if (failure) {
    for (size_t i = 0; i < locked; ++i) {
      const uint64_t a = ranges_[i].first / kPage * kPage,
                     b = std::min<uint64_t>(map_.size(), ranges_[i].first + ranges_[i].second);
      if (b > a) ::munlock(map_.data() + a, b - a);
    }
    ranges_.clear();
    locked_ = 0;
    const int e = failure;
    struct rlimit rl {};
    ::getrlimit(RLIMIT_MEMLOCK, &rl);
    ENGRAM_THROW(
        Code::kIo,
        path << ": cannot lock " << base::FormatBytes(want) << " in memory: " << std::strerror(e)
             << " (memlock limit "
             << (rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                              : base::FormatBytes(rl.rlim_cur))
             << "); raise it with 'ulimit -l unlimited' (or LimitMEMLOCK= in a systemd unit), "
                "or run as root");
  }
}

ResidentLock::~ResidentLock() {
  for (const auto& [off, len] : ranges_) {
    const uint64_t a = off / kPage * kPage, b = std::min<uint64_t>(map_.size(), off + len);
    if (b > a) ::munlock(map_.data() + a, b - a);
  }
}

std::string Residency::ToText() const {
  std::ostringstream os;
  auto pct = [](uint64_t a, uint64_t b) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%5.1f%%",
                  b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 100.0);
    return std::string(buf);
  };
  os << path << ": " << base::FormatBytes(resident_bytes) << " of " << base::FormatBytes(bytes)
     << " resident (" << pct(resident_bytes, bytes) << ")\n";
  for (const auto& p : parts)
    os << "  " << p.name << std::string(12 - std::min<size_t>(11, p.name.size()), ' ')
       << pct(p.resident_bytes, p.bytes) << "  " << base::FormatBytes(p.resident_bytes) << " of "
       << base::FormatBytes(p.bytes) << "\n";
  return os.str();
}

std::string Residency::ToJson() const {
  std::ostringstream os;
  os << "{\"path\":" << base::JsonString(path) << ",\"bytes\":" << bytes
     << ",\"resident_bytes\":" << resident_bytes << ",\"parts\":[";
  for (size_t i = 0; i < parts.size(); ++i)
    os << (i ? "," : "") << "{\"name\":\"" << parts[i].name << "\",\"offset\":" << parts[i].offset
       << ",\"bytes\":" << parts[i].bytes << ",\"resident_bytes\":" << parts[i].resident_bytes
       << "}";
  os << "]}";
  return os.str();
}

}  // namespace engram::table

// SketchOwners: majority votes per row, hashed in batches with their cells prefetched.
#include "engram/builder/sketch_owners.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/builder/zstd_stream.h"
#include "engram/format/format.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

SketchOwners::SketchOwners(const format::Layout& layout, int threads, uint32_t shard_index,
                           uint32_t shard_count)
    : l_(layout), threads_(threads), shard_index_(shard_index), shard_count_(shard_count) {
  cells_.assign(layout.total_rows, Cell{0, 0, 0, 0, 0});
}

SketchOwners::~SketchOwners() = default;

void SketchOwners::AddBlock(const TokenBlock& b) {
  const hash::AddressSpec& s = l_.spec;
  const uint32_t N = s.max_order, orders = N - 1;
  // Every position's full window (oldest first) and its n-grams' tags, computed once.
  std::vector<uint32_t> win;
  std::vector<uint32_t> tags;
  win.reserve(b.ids.size() * N);
  tags.reserve(b.ids.size() * orders);
  ForEachNgram(s, b, [&](uint32_t n, const uint32_t* ids) {
    if (n == hash::kMinOrder)
      win.insert(win.end(), ids + n - N, ids + n);  // ids + n - N = window start
    tags.push_back(hash::OwnerTag(ids, n, l_.owner_tag_seed));
  });
  const int64_t positions = static_cast<int64_t>(tags.size() / orders);
  std::vector<int64_t> jobs;
  for (size_t li = 0; li < s.n_layers(); ++li)
    for (uint32_t n = hash::kMinOrder; n <= N; ++n)
      for (uint32_t h = 0; h < s.n_heads; ++h)
        if (Owns(s.SubIndex(li, n, h))) jobs.push_back(static_cast<int64_t>(s.SubIndex(li, n, h)));
  const int64_t nj = static_cast<int64_t>(jobs.size());
  Cell* cells = cells_.data();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (int64_t j = 0; j < nj; ++j) {
    const size_t sub = static_cast<size_t>(jobs[j]);
    const size_t li = sub / s.per_layer();
    const uint32_t n = static_cast<uint32_t>((sub % s.per_layer()) / s.n_heads) + hash::kMinOrder;
    const uint32_t h = static_cast<uint32_t>(sub % s.n_heads);
    const uint64_t base_row = l_.row_offsets[sub];
    constexpr int64_t kBatch = 32;
    uint64_t rows[kBatch];
    for (int64_t p0 = 0; p0 < positions; p0 += kBatch) {
      const int64_t pe = std::min(positions, p0 + kBatch);
      // Hash a batch first and prefetch its cells, so that the cache misses overlap.
      for (int64_t p = p0; p < pe; ++p) {
        rows[p - p0] = base_row + hash::BucketOf(s, li, n, h, &win[p * N + (N - n)]);
        __builtin_prefetch(&cells[rows[p - p0]], 1);
      }
      for (int64_t p = p0; p < pe; ++p) {
        Cell& c = cells[rows[p - p0]];
        const uint32_t tag = tags[p * orders + (n - hash::kMinOrder)];
        if (c.tag == tag) {
          ++c.vote;
        } else if (c.vote == 0) {
          c.tag = tag;
          c.vote = 1;
        } else {
          --c.vote;
        }
        if (c.total != 0xFFFFFFFFu) ++c.total;
        c.seen |= static_cast<uint16_t>(1u << ((tag >> 7) & 15));
      }
    }
  }
}

void SketchOwners::Finish(OwnerArrays* oa) const {
  for (uint64_t r = 0; r < l_.total_rows; ++r) {
    const Cell& c = cells_[r];
    if (c.total == 0) continue;
    oa->tags[r] = c.tag;
    uint32_t zeros = 16 - static_cast<uint32_t>(__builtin_popcount(c.seen));
    // Linear counting over 16 bits: distinct ~ -16 ln(zeros / 16) (saturates near 44).
    double est = zeros == 0 ? 16.0 * std::log(16.0) : -16.0 * std::log(zeros / 16.0);
    uint32_t load = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(est)));
    if (oa->stats) {
      uint8_t* st = oa->stats + r * format::kStatsRowSize;
      base::StoreLE<uint32_t>(st, std::min(c.vote, c.total));
      base::StoreLE<uint32_t>(st + 4, c.total);
      base::StoreLE<uint32_t>(st + 8, load);
    } else {
      oa->own[r] = c.vote;
    }
  }
}

void SketchOwners::WriteCells(ZstdWriter& w) const {
  const hash::AddressSpec& s = l_.spec;
  uint64_t owned = 0;
  for (size_t sub = 0; sub < s.n_subtables(); ++sub) owned += Owns(sub);
  w.Write(&owned, 8);
  for (size_t sub = 0; sub < s.n_subtables(); ++sub) {
    if (!Owns(sub)) continue;
    uint64_t idx = sub;
    w.Write(&idx, 8);
    w.Write(&cells_[l_.row_offsets[sub]], s.sizes[sub] * sizeof(Cell));
  }
}

void SketchOwners::ReadCells(ZstdReader& r) {
  const hash::AddressSpec& s = l_.spec;
  uint64_t owned = 0;
  r.ReadExact(&owned, 8);
  ENGRAM_CHECK(owned <= s.n_subtables(), Code::kCorrupt,
               r.path() << ": bad sketch sub-table count");
  for (uint64_t k = 0; k < owned; ++k) {
    uint64_t sub = 0;
    r.ReadExact(&sub, 8);
    ENGRAM_CHECK(sub < s.n_subtables(), Code::kCorrupt, r.path() << ": bad sketch sub-table index");
    r.ReadExact(&cells_[l_.row_offsets[sub]], s.sizes[sub] * sizeof(Cell));
  }
}

}  // namespace engram::builder

// build (engram::builder): exact counting, owners equal to a brute-force count, values copied
// bit-exact from a checkpoint.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "../test_util.h"
#include "engram/base/error.h"
#include "engram/base/json.h"
#include "engram/builder/build.h"
#include "engram/builder/ngram_counter.h"
#include "engram/format/reader.h"
#include "engram/format/safetensors.h"
#include "engram/format/writer.h"
#include "engram/hash/ngram_hash.h"
#include "engram/table/gather.h"
#include "engram/table/inspect.h"
#include "engram/table/verify.h"

using namespace engram;
using namespace engram::table;
using namespace engram::format;
using namespace engram::builder;
using engram::testing::BigramSpec;
using engram::testing::OpenError;
using engram::testing::TempDir;
using engram::testing::WriteTable;

TEST_CASE("NgramCounter counts exactly across its in-place doublings") {
  // From 16 slots to 2^17: every doubling (clusters that wrap past the end included) must keep
  // every n-gram findable, or later pushes of it would open a second slot.
  for (uint32_t n : {2u, 3u, 5u}) {
    CAPTURE(n);
    NgramCounter c(n, 16);
    std::map<std::vector<uint32_t>, uint64_t> want;
    std::mt19937 rng(n);
    std::vector<uint32_t> ids(n);
    for (int i = 0; i < 200000; ++i) {
      for (auto& x : ids) x = rng() % 4 == 0 ? rng() % 5 : rng() % 300;  // many repeats
      c.Push(ids.data());
      ++want[ids];
    }
    c.Drain();
    CHECK(c.capacity() >= 1u << 15);
    CHECK(c.size() == want.size());
    size_t seen = 0;
    bool all_equal = true;
    c.ForEach([&](const uint32_t* r, uint64_t count) {
      auto it = want.find(std::vector<uint32_t>(r, r + n));
      all_equal &= it != want.end() && it->second == count;
      ++seen;
    });
    CHECK(all_equal);
    CHECK(seen == want.size());
    // Sorted records: numeric order, each once, counts as counted.
    const uint32_t* rec = c.SortRecords();
    size_t k = 0;
    for (const auto& [key, count] : want) {
      uint64_t got;
      std::memcpy(&got, rec + k * (n + 2) + n, 8);
      if (!std::equal(key.begin(), key.end(), rec + k * (n + 2)) || got != count) break;
      ++k;
    }
    CHECK(k == want.size());
  }
}

TEST_CASE("build: exact owners equal a brute-force count") {
  TempDir dir;
  // A corpus with a few documents; ids < 50.
  std::vector<uint32_t> toks;
  std::mt19937 rng(5);
  for (int d = 0; d < 40; ++d) {
    int len = 1 + rng() % 60;
    for (int i = 0; i < len; ++i) toks.push_back(rng() % 7 == 0 ? 3 : rng() % 50);
    toks.push_back(kDocSeparator);
  }
  std::string tf = dir / "c.u32";
  {
    base::TempFile t(tf);
    base::PwriteFull(t.fd(), toks.data(), toks.size() * 4, 0, t.temp_path());
    t.Commit();
  }
  for (auto mode : {std::string("native"), std::string("deepseek")}) {
    BuildOptions o;
    o.output = dir / "b.engram";
    o.token_files = {tf};
    o.layout.addressing = mode;
    o.layout.layer_ids = std::vector<uint32_t>{1, 2};
    o.layout.max_order = 3;
    o.layout.n_heads = 2;
    o.layout.buckets = 64;
    o.layout.row_dim = 8;
    o.layout.vocab_size = 50;
    o.layout.pad_token = 7;
    o.threads = 2;
    BuildResult res = Build(o, base::Silent());
    CHECK(res.tokens == toks.size() - 40);
    CHECK(res.documents == 40);
    auto r = Reader::Open(o.output);
    const Layout& l = r->layout();
    // Brute force: count n-grams per document with padding, then owners per row.
    std::map<std::vector<uint32_t>, uint64_t> counts;
    std::vector<uint32_t> doc;
    for (uint32_t t : toks) {
      if (t != kDocSeparator) {
        doc.push_back(t);
        continue;
      }
      for (size_t i = 0; i < doc.size(); ++i)
        for (uint32_t n = 2; n <= 3; ++n) {
          std::vector<uint32_t> g;
          for (int k = static_cast<int>(i) - static_cast<int>(n) + 1; k <= static_cast<int>(i); ++k)
            g.push_back(k < 0 ? l.spec.pad_id : doc[k]);
          counts[g]++;
        }
      doc.clear();
    }
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> best;  // row -> (count, tag)
    std::map<uint64_t, uint64_t> total, load;
    for (const auto& [g, c] : counts)
      for (size_t li = 0; li < 2; ++li)
        for (uint32_t h = 0; h < 2; ++h) {
          uint32_t n = static_cast<uint32_t>(g.size());
          uint64_t row =
              l.RowOf(l.spec.SubIndex(li, n, h), hash::BucketOf(l.spec, li, n, h, g.data()));
          uint32_t tag = hash::OwnerTag(g.data(), n, l.owner_tag_seed);
          auto& b = best[row];
          if (c > b.first || (c == b.first && tag < b.second)) b = {c, tag};
          total[row] += c;
          load[row] += 1;
        }
    uint64_t owned = 0;
    for (uint64_t row = 0; row < l.total_rows; ++row) {
      auto it = best.find(row);
      uint32_t want = it == best.end() ? 0 : it->second.second;
      REQUIRE(r->Tag(row) == want);
      StatsRow st = r->Stats(row);
      CHECK(st.owner_count == (it == best.end() ? 0 : it->second.first));
      CHECK(st.total_count == total[row]);
      CHECK(st.load == load[row]);
      owned += want != 0;
    }
    CHECK(res.owned_rows == owned);
    CHECK(Verify(o.output, {}, base::Silent()).ok());
  }
}

TEST_CASE("build: --values copies rows bit-exact from safetensors, shape and dtype checked") {
  TempDir dir;
  Layout l = engram::testing::SmallLayout(base::DType::kBF16, hash::AddressingMode::kNative, 5, 16,
                                          {1, 2}, 2, 2);
  const uint64_t n = l.total_rows * l.row_dim;
  std::vector<uint16_t> vals(n);
  for (uint64_t i = 0; i < n; ++i) {
    vals[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
    if ((vals[i] & 0x7F80) == 0x7F80) vals[i] ^= 0x0080;  // rows are finite: no Inf/NaN
  }
  std::string st = dir / "v.safetensors";
  {
    SafetensorsWriter w(st, {{"engram.weight", StDType::kBF16, {l.total_rows, l.row_dim}},
                             {"other", StDType::kF32, {3}}});
    w.Write(0, 0, vals.data(), n * 2);
    float three[3] = {1, 2, 3};
    w.Write(1, 0, three, 12);
    w.Finish();
  }
  BuildOptions o;
  o.output = dir / "b.engram";
  o.layout.layer_ids = std::vector<uint32_t>{1, 2};
  o.layout.max_order = 2;
  o.layout.n_heads = 2;
  o.layout.buckets = 32;
  o.layout.row_dim = 16;
  o.layout.vocab_size = 1000;
  o.layout.dtype = base::DType::kBF16;
  o.values_path = st;
  o.values_tensor = "engram.weight";
  Build(o, base::Silent());
  auto r = Reader::Open(o.output);
  CHECK(std::memcmp(r->RowBytes(0), vals.data(), n * 2) == 0);
  o.values_tensor = "other";
  try {
    Build(o, base::Silent());
    FAIL("shape not checked");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("has shape [3]") != std::string::npos);
  }
  o.values_tensor = "engram.weight";
  o.layout.dtype = base::DType::kF16;
  try {
    Build(o, base::Silent());
    FAIL("dtype not checked");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("is BF16 but the table stores f16") != std::string::npos);
  }
  // The earlier table is untouched by the failed builds.
  CHECK(Verify(o.output, {}, base::Silent()).ok());
}

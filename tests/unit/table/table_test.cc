// v3 table: write/read round trips for every dtype, Open's validation order, verify's coverage.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

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
#include "test_util.h"

using namespace engram;
using namespace engram::table;
using namespace engram::format;
using namespace engram::builder;
using engram::testing::TempDir;

namespace {

// Writes a table whose row r holds values f(r, i), tags r+1 (0 for every 3rd row).
void WriteTable(const std::string& path, const Layout& l, bool stats = true,
                std::vector<uint64_t> implausible_stats_rows = {}, uint32_t chunk_log2 = 12,
                std::vector<uint64_t> nan_rows = {},
                std::vector<std::pair<uint64_t, uint8_t>> first_scale_of = {}) {
  WriterOptions o;
  o.with_stats = stats;
  o.chunk_log2 = chunk_log2;
  TableWriter w(path, l, o);
  std::vector<float> v(l.row_dim);
  for (uint64_t r = 0; r < l.total_rows; ++r) {
    for (uint32_t i = 0; i < l.row_dim; ++i)
      v[i] = std::sin(0.1f * static_cast<float>(r * 31 + i)) * (1.0f + r % 5);
    base::EncodeRow(l.dtype, v, w.rows() + r * l.row_stride(),
                    l.scale_stride() ? w.scales() + r * l.scale_stride() : nullptr);
    w.tags()[r] = r % 3 ? static_cast<uint32_t>(r + 1) : 0;
    if (stats) {
      uint8_t* s = w.stats() + r * kStatsRowSize;
      uint32_t vals[3] = {r % 3 ? 2u : 0u, r % 3 ? 3u : 0u, r % 3 ? 2u : 0u};
      std::memcpy(s, vals, 12);
    }
  }
  for (uint64_t r : nan_rows) {  // a NaN in the row's last value
    uint8_t* v = w.rows() + r * l.row_stride() + (l.row_dim - 1) * base::DTypeSize(l.dtype);
    if (l.dtype == base::DType::kF32) std::memcpy(v, "\x00\x00\xC0\x7F", 4);
    if (l.dtype == base::DType::kBF16) std::memcpy(v, "\xC0\x7F", 2);
    if (l.dtype == base::DType::kF8E4M3) *v = 0x7F;
  }
  for (auto [r, scale] : first_scale_of) w.scales()[r * l.scale_stride()] = scale;  // fp8
  for (uint64_t r : implausible_stats_rows) {  // owner count above the bucket's total
    uint32_t vals[3] = {9, 3, 2};
    std::memcpy(w.stats() + r * kStatsRowSize, vals, 12);
  }
  w.SetProvenance("{\"creator\":\"test\"}");
  w.Commit(base::Silent());
}

// Layer 1, bigrams, one head, 100 canonical ids: the verify tests' tables.
hash::AddressSpec BigramSpec(uint32_t log2_buckets) {
  hash::AddressSpec s;
  s.layer_ids = {1};
  s.max_order = 2;
  s.n_heads = 1;
  s.log2_buckets = log2_buckets;
  s.canonical_vocab = 100;
  return s;
}

std::string OpenError(const std::string& path, Code* code = nullptr) {
  try {
    Reader::Open(path);
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("round trip for every dtype and both addressing modes") {
  TempDir dir;
  for (auto dt : {base::DType::kF32, base::DType::kBF16, base::DType::kF16, base::DType::kF8E4M3}) {
    for (auto mode : {hash::AddressingMode::kNative, hash::AddressingMode::kDeepSeek}) {
      Layout l = engram::testing::SmallLayout(dt, mode, 6, 64, {1, 3}, 3, 2);
      std::string p = dir / "t.engram";
      WriteTable(p, l);
      auto r = Reader::Open(p);
      CHECK(r->layout().total_rows == l.total_rows);
      CHECK(r->layout().spec.sizes == l.spec.sizes);
      CHECK(r->layout().spec.multipliers == l.spec.multipliers);
      CHECK(r->layout().dtype == dt);
      std::vector<float> v(l.row_dim), want(l.row_dim), got(l.row_dim);
      std::vector<uint8_t> enc(l.row_stride()), sc(l.scale_stride() + 1);
      for (uint64_t row = 0; row < l.total_rows; row += 7) {
        for (uint32_t i = 0; i < l.row_dim; ++i)
          v[i] = std::sin(0.1f * static_cast<float>(row * 31 + i)) * (1.0f + row % 5);
        base::EncodeRow(dt, v, enc.data(), sc.data());
        base::DecodeRow(dt, enc.data(), sc.data(), want);
        r->DecodeRowTo(row, got);
        for (uint32_t i = 0; i < l.row_dim; ++i) REQUIRE(got[i] == want[i]);
        CHECK(r->Tag(row) == (row % 3 ? row + 1 : 0));
        CHECK(r->Stats(row).total_count == (row % 3 ? 3u : 0u));
      }
      // GatherRowsF32 (run's CPU gather) lays rows out in request order, repeats included.
      std::vector<uint64_t> rows = {l.total_rows - 1, 0, 5, 5, l.total_rows / 2};
      std::vector<float> gathered(rows.size() * l.row_dim);
      GatherRowsF32(*r, rows, gathered.data());
      for (size_t i = 0; i < rows.size(); ++i) {
        r->DecodeRowTo(rows[i], want);
        for (uint32_t j = 0; j < l.row_dim; ++j) REQUIRE(gathered[i * l.row_dim + j] == want[j]);
      }
      VerifyReport rep = Verify(p, {}, base::Silent());
      CHECK(rep.ok());
      CHECK(rep.chunks_checked > 0);
    }
  }
}

TEST_CASE("Open checks in spec order, each with its own error") {
  TempDir dir;
  std::string p = dir / "t.engram";
  Layout l = engram::testing::SmallLayout();
  auto reset = [&] { WriteTable(p, l); };
  Code code;

  reset();
  auto bytes = engram::testing::ReadAll(p);
  // Every byte of the header: magic, version, or the header checksum catches it.
  for (size_t off = 0; off < kHeaderSize; ++off) {
    auto b = bytes;
    b[off] ^= 0x40;
    engram::testing::WriteAll(p, b);
    std::string e = OpenError(p, &code);
    INFO("offset " << off);
    if (off < 8) {
      REQUIRE(e.find("header.magic") != std::string::npos);
    } else if (off < 10) {
      REQUIRE(code == Code::kVersion);
      REQUIRE(e.find("header.version_major") != std::string::npos);
    } else {
      REQUIRE(e.find("header checksum mismatch") != std::string::npos);
    }
  }
  // Fields with a valid checksum but invalid values.
  struct Case {
    const char* want;
    std::function<void(Header&)> f;
  };
  std::vector<Case> cases = {
      {"required_flags has unknown bits", [](Header& h) { h.required_flags = 4; }},
      {"header.n_sections = 0", [](Header& h) { h.n_sections = 0; }},
      {"header.chunk_log2", [](Header& h) { h.chunk_log2 = 40; }},
      {"header.file_size", [](Header& h) { h.file_size = 100; }},
      {"truncated", [](Header& h) { h.file_size += 64 * 1024; }},
      {"lies outside the base", [](Header& h) { h.sections[1].size = 1ull << 40; }},
      {"lies outside the base", [](Header& h) { h.sections[1].offset = UINT64_MAX - 63; }},
      {"not 64-byte aligned", [](Header& h) { h.sections[1].offset += 8; }},
      {"sections overlap", [](Header& h) { h.sections[2].offset = h.sections[1].offset; }},
      {"appears twice", [](Header& h) { h.sections[2].type = h.sections[1].type; }},
      {"unknown type", [](Header& h) { h.sections[0].type = 99; }},
      {"unused section table entry", [](Header& h) { h.sections[20].size = 1; }},
      {"header.log2_buckets", [](Header& h) { h.log2_buckets = 0; }},
      {"header.dtype", [](Header& h) { h.dtype = 9; }},
      {"header.max_order", [](Header& h) { h.max_order = 1; }},
      {"header.n_heads", [](Header& h) { h.n_heads = 0; }},
      {"header.row_stride", [](Header& h) { h.row_stride += 4; }},
      {"header.pad_id", [](Header& h) { h.pad_id = h.canonical_vocab; }},
      {"CHUNK_SUMS section checksum", [](Header& h) { h.sums_checksum ^= 1; }},
      {"header.total_rows", [](Header& h) { h.total_rows += 1; }},
      {"owner_tag_seed", [](Header& h) { h.owner_tag_seed ^= 1; }},
      {"do not match the addressing", [](Header& h) { h.seed ^= 1; }},
  };
  for (const auto& c : cases) {
    reset();
    engram::testing::MutateHeader(p, c.f);
    std::string e = OpenError(p, &code);
    INFO(std::string(c.want) << " got: " << e);
    CHECK(e.find(c.want) != std::string::npos);
  }
  reset();
  CHECK(OpenError(p).empty());
}

TEST_CASE("metadata sections are checked by Open, data sections by verify") {
  TempDir dir;
  std::string p = dir / "t.engram";
  Layout l = engram::testing::SmallLayout();
  WriteTable(p, l);
  auto r = Reader::Open(p);
  std::map<std::string, std::pair<uint64_t, uint64_t>> secs;
  for (uint32_t i = 0; i < r->header().n_sections; ++i)
    secs[std::string(SectionName(r->header().sections[i].type))] = {r->header().sections[i].offset,
                                                                    r->header().sections[i].size};
  r.reset();
  auto bytes = engram::testing::ReadAll(p);
  for (const char* name : {"LAYOUT", "PROVENANCE"}) {
    auto b = bytes;
    b[secs[name].first + 3] ^= 1;
    engram::testing::WriteAll(p, b);
    std::string e = OpenError(p);
    INFO(name << ": " << e);
    CHECK(e.find(std::string("section ") + name) != std::string::npos);
  }
  for (const char* name : {"ROWS", "TAGS", "STATS"}) {
    auto b = bytes;
    b[secs[name].first + secs[name].second / 2] ^= 0x10;
    engram::testing::WriteAll(p, b);
    CHECK(OpenError(p).empty());
    VerifyReport rep = Verify(p, {}, base::Silent());
    REQUIRE(!rep.problems.empty());
    CHECK(rep.problems[0].field.find(std::string("section ") + name + " chunk") == 0);
  }
}

TEST_CASE("verify catches every single-byte flip of the base and every truncation") {
  TempDir dir;
  std::string p = dir / "t.engram";
  // Small enough to flip every byte; fp8 so that SCALES is covered too; with a canonical map.
  hash::AddressSpec s;
  s.layer_ids = {4};
  s.max_order = 2;
  s.n_heads = 1;
  s.log2_buckets = 3;
  std::vector<uint32_t> map = {0, 1, 1, 2, 3, 2, 4};
  Layout l = MakeLayout(s, 32, base::DType::kF8E4M3, map, 0x1234);
  WriteTable(p, l);
  auto good = engram::testing::ReadAll(p);
  const uint64_t base_size = Reader::Open(p)->header().file_size;
  REQUIRE(base_size == good.size());
  size_t missed = 0;
  VerifyOptions one_thread;
  one_thread.threads = 1;
  for (size_t off = 0; off < good.size(); ++off) {
    auto b = good;
    b[off] ^= static_cast<uint8_t>(1u << (off % 8));
    engram::testing::WriteAll(p, b);
    VerifyReport rep;
    try {
      rep = Verify(p, one_thread, base::Silent());
    } catch (const Error& e) {
      CHECK(e.code() == Code::kVersion);  // a flipped major version is reported as such (exit 4)
      continue;
    }
    if (rep.ok()) {
      ++missed;
      MESSAGE("flip at offset " << off << " not detected");
    }
  }
  CHECK(missed == 0);
  for (uint64_t len : {uint64_t{0}, uint64_t{7}, uint64_t{4095}, uint64_t{4096}, uint64_t{5000},
                       base_size / 2, base_size - 64, base_size - 1}) {
    auto b = good;
    b.resize(len);
    engram::testing::WriteAll(p, b);
    VerifyReport rep = Verify(p, {}, base::Silent());
    INFO("truncated to " << len);
    REQUIRE(!rep.ok());
    CHECK(rep.problems[0].message.find("truncated") != std::string::npos);
  }
}

TEST_CASE("verify names a non-finite row wherever it lies: across pieces, chunks and threads") {
  // Rows are read 128 KiB at a time within 1 MiB chunks: strides that do not divide the pieces,
  // a stride longer than a piece, rows that straddle a piece or a chunk, the first and last row.
  TempDir dir;
  std::string p = dir / "t.engram";
  struct Shape {
    base::DType dtype;
    uint32_t row_dim, log2_buckets;
  };
  for (Shape sh : {Shape{base::DType::kF32, 40000, 5}, Shape{base::DType::kBF16, 300, 13},
                   Shape{base::DType::kF8E4M3, 96, 15}}) {
    Layout l = MakeLayout(BigramSpec(sh.log2_buckets), sh.row_dim, sh.dtype, {}, 0);
    const uint64_t stride = l.row_stride(), rows = l.total_rows;
    std::vector<uint64_t> bad = {
        0, rows - 1, (128 << 10) / stride, (1 << 20) / stride, (3 << 20) / stride, rows / 2};
    for (uint64_t r : bad) {
      r = std::min(r, rows - 1);
      CAPTURE(base::DTypeName(sh.dtype));
      CAPTURE(r);
      WriteTable(p, l, true, {}, 20, {r});
      for (int threads : {1, 2}) {
        VerifyOptions o;
        o.threads = threads;
        VerifyReport rep = Verify(p, o, base::Silent());
        REQUIRE(rep.problems.size() == 1);
        CHECK(rep.problems[0].message.find("1 row(s) hold non-finite values (Inf or NaN); first: "
                                           "row " +
                                           std::to_string(r) + " ") != std::string::npos);
      }
    }
    WriteTable(p, l, true, {}, 20, {});
    CHECK(Verify(p, {}, base::Silent()).ok());
  }
}

TEST_CASE("verify names fp8 rows made non-finite by their block scale, each row once") {
  // SCALES is checked apart from the value bytes: a NaN scale (0xFF), a scale that overflows the
  // block's values (0xF8: 2^121 times values up to 448), a high scale that stays finite (0xF0),
  // and a row with both a NaN byte and a NaN scale.
  TempDir dir;
  std::string p = dir / "t.engram";
  Layout l = MakeLayout(BigramSpec(15), 96, base::DType::kF8E4M3, {}, 0);
  const uint64_t rows = l.total_rows;
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    VerifyOptions o;
    o.threads = threads;
    WriteTable(p, l, true, {}, 20, {rows - 1}, {{7, 0xFF}, {rows / 2, 0xF8}, {rows - 1, 0xFF}});
    VerifyReport rep = Verify(p, o, base::Silent());
    REQUIRE(rep.problems.size() == 1);
    CHECK(rep.problems[0].message.find(
              "3 row(s) hold non-finite values (Inf or NaN); first: row 7 ") != std::string::npos);
    WriteTable(p, l, true, {}, 20, {}, {{rows / 3, 0xF0}});  // 2^113 * at most 448: finite
    std::vector<float> v(l.row_dim);
    auto r = Reader::Open(p);
    base::DecodeRow(l.dtype, r->RowBytes(rows / 3), r->ScaleBytes(rows / 3), v);
    CHECK(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }));
    CHECK(Verify(p, o, base::Silent()).ok());
  }
}

TEST_CASE("verify reports implausible statistics rows by count and first row, in any chunk") {
  TempDir dir;
  const std::string p = dir / "s.engram";
  hash::AddressSpec s;
  s.layer_ids = {1};
  s.max_order = 3;
  s.n_heads = 2;
  s.log2_buckets = 9;  // 2048 rows: 8 STATS chunks of 4 KiB
  s.canonical_vocab = 100;
  Layout l = MakeLayout(s, 8, base::DType::kF32, {}, 0);
  WriteTable(p, l, true, {1500, 300, 1999});
  for (int threads : {1, 2}) {
    VerifyOptions o;
    o.threads = threads;
    VerifyReport rep = Verify(p, o, base::Silent());
    REQUIRE(rep.problems.size() == 1);
    CHECK(rep.problems[0].field == "section STATS");
    CHECK(rep.problems[0].message == "3 rows have inconsistent statistics (first: row 300)");
  }
  WriteTable(p, l, true);
  CHECK(Verify(p, {}, base::Silent()).ok());
}

TEST_CASE("a future minor version is read, a future major version is refused with kVersion") {
  TempDir dir;
  std::string p = dir / "t.engram";
  WriteTable(p, engram::testing::SmallLayout());
  engram::testing::MutateHeader(p, [](Header& h) { h.version_minor = 7; });
  CHECK(OpenError(p).empty());
  engram::testing::MutateHeader(p, [](Header& h) { h.version_major = 4; });
  Code code;
  std::string e = OpenError(p, &code);
  CHECK(code == Code::kVersion);
  CHECK(e.find("header.version_major = 4, this build reads 3") != std::string::npos);
  CHECK_THROWS_AS(Verify(p, {}, base::Silent()), Error);
}

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

TEST_CASE("inspect reports layout, journal and statistics") {
  TempDir dir;
  std::string p = dir / "t.engram";
  WriteTable(p, engram::testing::SmallLayout(base::DType::kF16, hash::AddressingMode::kDeepSeek, 6,
                                             32, {3, 9}, 3, 2));
  InspectInfo in = Inspect(p, {true, true});
  CHECK(in.addressing == "deepseek");
  CHECK(in.dtype == "f16");
  CHECK(in.layer_ids == std::vector<uint32_t>{3, 9});
  CHECK(in.multipliers.size() == 6);
  CHECK(in.journal_entries == 0);
  CHECK(in.owned_rows > 0);
  CHECK(in.load_histogram[2] == in.owned_rows);
  CHECK(in.load_log2_histogram.size() == 3);  // loads 0, 1, 2-3
  CHECK(in.load_log2_histogram[2] == in.owned_rows);
  CHECK(in.load_max == 2);
  CHECK(in.load_sum == 2 * in.owned_rows);
  std::string j = in.ToJson();
  CHECK(base::Json::Parse(j, "inspect").Find("journal")->Find("deterministic")->as_bool());
  CHECK(in.ToText().find("prime sub-table sizes") != std::string::npos);
}

TEST_CASE("safetensors reader refuses hostile headers") {
  TempDir dir;
  std::string p = dir / "x.safetensors";
  auto write = [&](const std::string& header, size_t data_bytes) {
    std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
    uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, header.data(), header.size());
    engram::testing::WriteAll(p, b);
  };
  auto err = [&]() -> std::string {
    try {
      SafetensorsFile::Open(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  CHECK(err().empty());
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  CHECK(err().find("past the") != std::string::npos);
  write(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  CHECK(err().find("need") != std::string::npos);
  write(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8);
  CHECK(err().find("overlap") != std::string::npos);
  write(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8);
  CHECK(err().find("unknown dtype") != std::string::npos);
  write(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8);
  CHECK(err().find("overflows") != std::string::npos);
  std::vector<uint8_t> huge(16, 0xFF);
  engram::testing::WriteAll(p, huge);
  CHECK(err().find("100 MB limit") != std::string::npos);
}

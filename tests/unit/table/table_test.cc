// Operations on a table (engram::table): verify's coverage of every byte and row, and inspect.
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

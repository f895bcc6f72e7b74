// The v3 file (engram::format): write/read round trips for every dtype, Open's validation order
// and its errors, version handling, and the safetensors reader against hostile headers.
#include <doctest/doctest.h>
#include <fcntl.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "../test_util.h"
#include "engram/base/endian.h"
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

TEST_CASE("round trip for every dtype and both addressing modes") {
  TempDir dir;
  for (auto dt : {base::DType::kF32, base::DType::kBF16, base::DType::kF16, base::DType::kF8E4M3,
                  base::DType::kI8, base::DType::kI4}) {
    for (auto mode : {hash::AddressingMode::kNative, hash::AddressingMode::kDeepSeek}) {
      Layout l = engram::testing::SmallLayout(dt, mode, 6, 64, {1, 3}, 3, 2);
      CAPTURE(base::DTypeName(dt));
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
      // Required flag bit 2 marks exactly the rows a reader before 3.4 cannot read.
      CHECK(((r->header().required_flags & kReqV34Rows) != 0) == base::IsIntDType(dt));
    }
  }
  // fp8 rows of 16 values: one short scale block, which also needs a 3.4 reader.
  Layout l = engram::testing::SmallLayout(base::DType::kF8E4M3, hash::AddressingMode::kNative, 6,
                                          16, {1}, 2, 1);
  CHECK(l.scale_stride() == 1);
  std::string p = dir / "short.engram";
  WriteTable(p, l);
  CHECK((Reader::Open(p)->header().required_flags & kReqV34Rows) != 0);
  CHECK(Verify(p, {}, base::Silent()).ok());
}

TEST_CASE("int8 and int4 tables: a damaged scale is a non-finite row to verify") {
  TempDir dir;
  for (auto dt : {base::DType::kI8, base::DType::kI4}) {
    Layout l = engram::testing::SmallLayout(dt, hash::AddressingMode::kNative, 6, 64, {1}, 2, 1);
    std::string p = dir / "t.engram";
    WriteTable(p, l);
    auto r = Reader::Open(p);
    const SectionEntry* sc = r->FindSection(SectionType::kScales);
    REQUIRE(sc);
    const uint64_t at = sc->offset + 5 * l.scale_stride();
    r.reset();
    {
      base::UniqueFd fd = base::OpenFile(p, O_RDWR);
      const uint8_t nan32[4] = {0, 0, 0xC0, 0x7F}, nan16[2] = {0x00, 0x7E};
      if (dt == base::DType::kI8)
        base::PwriteFull(fd.get(), nan32, 4, at, p);
      else
        base::PwriteFull(fd.get(), nan16, 2, at, p);
    }
    VerifyReport rep = Verify(p, {}, base::Silent());
    bool named = false;
    for (const auto& prob : rep.problems)
      named |= prob.message.find("non-finite") != std::string::npos &&
               prob.message.find("first: row 5 ") != std::string::npos;
    CHECK(named);
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
      {"required_flags has unknown bits", [](Header& h) { h.required_flags = 8; }},
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

TEST_CASE(
    "paged chunk sums: a page's term replaced equals the sum recomputed, wherever the "
    "section lies") {
  std::mt19937 rng(7);
  const uint32_t type = static_cast<uint32_t>(SectionType::kRows);
  std::vector<uint8_t> chunk(3 * kSumPage + 100);  // the last page is short
  for (auto& b : chunk) b = static_cast<uint8_t>(rng());
  const uint64_t at = 1 << 20;  // the chunk's offset within its section
  const uint64_t before = ChunkSum(true, type, at, chunk.data(), chunk.size());
  CHECK(before != ChunkSum(false, type, at, chunk.data(), chunk.size()));
  // Terms are seeded by the offset within the section and by its type, not by the file offset.
  CHECK(before != ChunkSum(true, type, at + kSumPage, chunk.data(), chunk.size()));
  CHECK(before !=
        ChunkSum(true, static_cast<uint32_t>(SectionType::kTags), at, chunk.data(), chunk.size()));
  for (uint64_t page : {0ull, 2ull, 3ull}) {
    std::vector<uint8_t> changed = chunk;
    const uint64_t off = page * kSumPage, len = std::min<uint64_t>(kSumPage, chunk.size() - off);
    const uint64_t old_term = PageSum(type, at + off, changed.data() + off, len);
    changed[off + len / 2] ^= 0x40;
    const uint64_t new_term = PageSum(type, at + off, changed.data() + off, len);
    CHECK(before - old_term + new_term == ChunkSum(true, type, at, changed.data(), changed.size()));
    CHECK(before != ChunkSum(true, type, at, changed.data(), changed.size()));
  }
  // Two pages swapped change the sum (each term is seeded by its page's offset).
  std::vector<uint8_t> swapped = chunk;
  std::swap_ranges(swapped.begin(), swapped.begin() + kSumPage, swapped.begin() + kSumPage);
  CHECK(before != ChunkSum(true, type, at, swapped.data(), swapped.size()));
}

TEST_CASE("the fold record round-trips and a torn or altered one is not taken") {
  FoldRecord r;
  r.state = 2;
  r.old_header_checksum = 11;
  r.mid_header_checksum = 22;
  r.journal_end = 123456;
  r.stage_offset = 1 << 20;
  r.stage_size = 8192;
  r.stage_checksum = 33;
  r.tail_offset = 65536;
  for (size_t i = 0; i < kFoldHeaderCopy; ++i) r.header[i] = static_cast<uint8_t>(i * 7);
  r.header_checksum = 44;
  std::vector<uint8_t> b(kFoldRecordSize);
  EncodeFoldRecord(r, b.data());
  FoldRecord d;
  REQUIRE(DecodeFoldRecord(b.data(), &d));
  CHECK(d.state == 2);
  CHECK(d.journal_end == 123456);
  CHECK(d.tail_offset == 65536);
  CHECK(std::memcmp(d.header, r.header, kFoldHeaderCopy) == 0);
  for (size_t k : {0ul, 8ul, 40ul, 500ul, 1391ul, 1399ul}) {
    std::vector<uint8_t> bad = b;
    bad[k] ^= 1;
    CHECK_FALSE(DecodeFoldRecord(bad.data(), &d));
  }
  std::vector<uint8_t> zero(kFoldRecordSize, 0);
  CHECK_FALSE(DecodeFoldRecord(zero.data(), &d));
}

TEST_CASE("a header torn during an in-place fold is read from the fold record's copy") {
  engram::testing::TempDir d;
  const std::string p = d / "t.engram";
  engram::testing::WriteTable(p, engram::testing::SmallLayout());
  auto bytes = engram::testing::ReadAll(p);
  // The record of a fold that was installing this very header, then a torn header.
  FoldRecord r;
  r.state = 1;
  std::memcpy(r.header, bytes.data(), kFoldHeaderCopy);
  r.header_checksum = base::LoadLE<uint64_t>(bytes.data() + off::kHeaderChecksum);
  EncodeFoldRecord(r, bytes.data() + kFoldRecordOffset);
  for (size_t k = 200; k < 700; ++k) bytes[k] = 0;
  engram::testing::WriteAll(p, bytes);
  auto reader = Reader::Open(p);
  CHECK(reader->header().header_checksum == r.header_checksum);
  CHECK(reader->layout().total_rows == engram::testing::SmallLayout().total_rows);
  // Without the record, the same tear is reported as damage.
  std::memset(bytes.data() + kFoldRecordOffset, 0, kFoldRecordSize);
  engram::testing::WriteAll(p, bytes);
  CHECK(engram::testing::OpenError(p).find("header checksum mismatch") != std::string::npos);
}

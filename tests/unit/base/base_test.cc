// Unit tests of engram_base: dtype conversions, JSON, sizes, files.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engram/base/checked.h"
#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/memory.h"
#include "engram/base/units.h"

using namespace engram;
using namespace engram::base;

TEST_CASE("bf16 rounds to nearest even and round-trips") {
  CHECK(FloatToBF16(1.0f) == 0x3F80);
  CHECK(BF16ToFloat(0x3F80) == 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties go to even (1.0).
  CHECK(FloatToBF16(1.00390625f) == 0x3F80);
  CHECK(FloatToBF16(1.01171875f) == 0x3F82);  // 1 + 3*2^-8 -> rounds up to even 1+2^-6
  CHECK(std::isnan(BF16ToFloat(FloatToBF16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    float f = BF16ToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) CHECK(FloatToBF16(f) == h);
  }
}

TEST_CASE("f16 conversions are exact on every representable value") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    REQUIRE(FloatToF16(f) == h);
  }
  CHECK(FloatToF16(65520.0f) == 0x7C00);  // rounds to infinity
  CHECK(FloatToF16(65504.0f) == 0x7BFF);
  CHECK(FloatToF16(5.9604645e-08f) == 0x0001);  // smallest subnormal
  CHECK(FloatToF16(2.9802322e-08f) == 0x0000);  // half of it: ties to even (0)
}

TEST_CASE("fp8 e4m3fn: every code round-trips, saturation, e8m0 scales") {
  for (int q = 0; q < 256; ++q) {
    float f = E4M3ToFloat(static_cast<uint8_t>(q));
    if (std::isnan(f)) continue;
    if (q == 0x80) continue;  // -0 encodes back as -0 (0x80), checked below
    REQUIRE(FloatToE4M3(f) == q);
  }
  CHECK(FloatToE4M3(-0.0f) == 0x80);
  CHECK(E4M3ToFloat(0x7E) == 448.0f);
  CHECK(FloatToE4M3(1000.0f) == 0x7E);
  CHECK(FloatToE4M3(-1e9f) == 0xFE);
  CHECK(E4M3ToFloat(0x01) == std::ldexp(1.0f, -9));
  CHECK(E8M0ToFloat(127) == 1.0f);
  CHECK(E8M0ToFloat(130) == 8.0f);
  CHECK(std::isnan(E8M0ToFloat(255)));
  std::vector<float> row(64);
  for (int i = 0; i < 64; ++i) row[i] = (i - 30) * 0.37f;
  row[40] = 1000.0f;  // forces a large scale in the second block
  std::vector<uint8_t> q(64), s(2);
  EncodeRow(DType::kF8E4M3, row, q.data(), s.data());
  CHECK(s[1] == 127 + 2);  // 1000/448 = 2.23 -> scale 4 = 2^2
  std::vector<float> back(64);
  DecodeRow(DType::kF8E4M3, q.data(), s.data(), back);
  for (int i = 0; i < 64; ++i)
    CHECK(std::fabs(back[i] - row[i]) <= std::fabs(row[i]) * 0.0625f + 1e-6f * 64);
}

TEST_CASE("fp8 golden vectors: DeepSeek-V4.1's block quantisation, computed independently") {
  // Expected bytes from an independent Python model of the V4.1 recipe: per 32 values the scale
  // is 2^ceil(log2(amax / 448)) (e8m0 127 + that exponent), and x / scale rounds to the nearest
  // e4m3fn value, ties to the even code, saturating at 448; tiny negatives keep their sign (-0).
  const std::vector<float> x = {-78.8265609741211f,       1.0684758424758911f,
                                -6.763792498531984e-06f,  0.0f,
                                -339.6424560546875f,      1000.0f,
                                48.002498626708984f,      -2397.83544921875f,
                                -86.92738342285156f,      -10.45251178741455f,
                                -5.740922451019287f,      1214.0762939453125f,
                                114.50032043457031f,      -8.704765319824219f,
                                -69.9632568359375f,       15.436701774597168f,
                                3.611154317855835f,       -0.0015691221924498677f,
                                -153.3050537109375f,      -0.05378644913434982f,
                                4.8493266105651855f,      1.758299708366394f,
                                -1.099565863609314f,      0.00018031299987342209f,
                                0.0011098934337496758f,   0.0015302883693948388f,
                                -1.2608681917190552f,     -1.77437162399292f,
                                31.557655334472656f,      -0.7438722252845764f,
                                2.9212005756562576e-05f,  0.22047412395477295f,
                                -4.61808443069458f,       -99.77538299560547f,
                                1.6782280206680298f,      1.296455979347229f,
                                -2259.83984375f,          2.0853054523468018f,
                                -0.3223574161529541f,     -0.0059833889827132225f,
                                1.0689345799619332e-05f,  97.57147216796875f,
                                -0.00015981667093001306f, 3010.9716796875f,
                                -0.000516040250658989f,   1.0901463031768799f,
                                0.0012647804105654359f,   0.02154899202287197f,
                                0.12417501211166382f,     18.348119735717773f,
                                -0.06862757354974747f,    -0.0006598032778128982f,
                                -8.86096477508545f,       -2.6349387168884277f,
                                -0.017208458855748177f,   -0.7625402212142944f,
                                -112.87244415283203f,     0.050705112516880035f,
                                2.0514492988586426f,      -0.5855581164360046f,
                                0.05510196089744568f,     0.0038626431487500668f,
                                -0.05337723344564438f,    -0.003337071742862463f};
  const std::vector<uint8_t> codes = {
      0xD2, 0x21, 0x80, 0x00, 0xE3, 0x70, 0x4C, 0xF9, 0xD3, 0xBA, 0xB3, 0x71, 0x56,
      0xB9, 0xD1, 0x3F, 0x2E, 0x80, 0xDA, 0x83, 0x32, 0x26, 0xA1, 0x00, 0x00, 0x00,
      0xA2, 0xA6, 0x48, 0x9C, 0x00, 0x0E, 0xB1, 0xD4, 0x25, 0x22, 0xF9, 0x28, 0x92,
      0x80, 0x00, 0x54, 0x80, 0x7C, 0x80, 0x21, 0x00, 0x01, 0x08, 0x41, 0x84, 0x80,
      0xB9, 0xAB, 0x81, 0x9C, 0xD6, 0x03, 0x28, 0x99, 0x04, 0x00, 0x83, 0x80};
  std::vector<uint8_t> q(64), sc(2);
  EncodeRow(DType::kF8E4M3, x, q.data(), sc.data());
  CHECK(sc == std::vector<uint8_t>{130, 130});
  CHECK(q == codes);
  // Ties go to the even code: 1.0625 lies between 1.0 (0x38) and 1.125 (0x39), 1.1875 between
  // 1.125 and 1.25 (0x3A); 448 keeps the scale at 2^0.
  std::vector<float> t(32, 0.0f);
  t[0] = 448.0f, t[1] = 1.0625f, t[2] = 1.1875f, t[3] = -1.0625f;
  std::vector<uint8_t> tq(32), ts(1);
  EncodeRow(DType::kF8E4M3, t, tq.data(), ts.data());
  CHECK(ts[0] == 127);
  CHECK(tq[0] == 0x7E);
  CHECK(tq[1] == 0x38);
  CHECK(tq[2] == 0x3A);
  CHECK(tq[3] == 0xB8);
}

TEST_CASE("dtype names parse both ways") {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI8, DType::kI4})
    CHECK(ParseDType(DTypeName(t)) == t);
  CHECK(ParseDType("bfloat16") == DType::kBF16);
  CHECK(ParseDType("float8_e4m3fn") == DType::kF8E4M3);
  CHECK(ParseDType("q8") == DType::kI8);
  CHECK(!ParseDType("int2").has_value());
  CHECK(!IsValidDType(6));
}

TEST_CASE("row and scale sizes of every dtype, short last blocks included") {
  CHECK(RowBytes(DType::kF32, 16) == 64);
  CHECK(RowBytes(DType::kI4, 16) == 8);
  CHECK(RowBytes(DType::kI4, 17) == 9);
  CHECK(ScaleBytes(DType::kF8E4M3, 16) == 1);
  CHECK(ScaleBytes(DType::kF8E4M3, 256) == 8);
  CHECK(ScaleBytes(DType::kF8E4M3, 48) == 2);
  CHECK(ScaleBytes(DType::kI8, 256) == 4);
  CHECK(ScaleBytes(DType::kI4, 256) == 16);
  CHECK(ScaleBytes(DType::kI4, 16) == 2);
  CHECK(ScaleBytes(DType::kBF16, 256) == 0);
}

TEST_CASE("round trips: f32 -> bf16 -> f32 is bf16 rounding; int8 and int4 within s/2") {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t n : {1u, 16u, 31u, 32u, 33u, 64u, 256u, 257u}) {
    CAPTURE(n);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(n);
      const float mag = std::ldexp(1.0f, trial % 30 - 15);
      for (auto& v : x) v = nd(rng) * mag;
      if (trial % 7 == 0) x[0] = 0;  // zeros, and an all-zero row below
      if (trial == 1) std::fill(x.begin(), x.end(), 0.0f);
      std::vector<float> back(n);
      // bf16 and f16: the decoded row is exactly the rounding of each value.
      for (DType t : {DType::kBF16, DType::kF16}) {
        std::vector<uint8_t> b(RowBytes(t, n));
        EncodeRow(t, x, b.data(), nullptr);
        DecodeRow(t, b.data(), nullptr, back);
        for (size_t i = 0; i < n; ++i)
          CHECK(back[i] == (t == DType::kBF16 ? BF16ToFloat(FloatToBF16(x[i]))
                                              : F16ToFloat(FloatToF16(x[i]))));
      }
      // int8: |error| <= s/2 with s = max|x| / 127 (a float rounding's slack).
      {
        std::vector<uint8_t> b(RowBytes(DType::kI8, n)), s(ScaleBytes(DType::kI8, n));
        EncodeRow(DType::kI8, x, b.data(), s.data());
        DecodeRow(DType::kI8, b.data(), s.data(), back);
        float amax = 0;
        for (float v : x) amax = std::max(amax, std::fabs(v));
        const float half = amax / 127.0f / 2.0f;
        for (size_t i = 0; i < n; ++i) CHECK(std::fabs(back[i] - x[i]) <= half * 1.0001f);
        CHECK(FirstNonFinite(DType::kI8, b.data(), s.data(), n) == n);
      }
      // int4: per block of 32, |error| <= s/2 with s its f16 scale, s >= max|x| / 7 and s at
      // most one f16 step above it.
      {
        std::vector<uint8_t> b(RowBytes(DType::kI4, n)), s(ScaleBytes(DType::kI4, n));
        EncodeRow(DType::kI4, x, b.data(), s.data());
        DecodeRow(DType::kI4, b.data(), s.data(), back);
        for (size_t b0 = 0; b0 < n; b0 += kI4BlockSize) {
          uint16_t h;
          std::memcpy(&h, s.data() + 2 * (b0 / kI4BlockSize), 2);
          const float sc = F16ToFloat(h);
          float amax = 0;
          for (size_t i = b0; i < std::min(n, b0 + kI4BlockSize); ++i)
            amax = std::max(amax, std::fabs(x[i]));
          CHECK(sc * 7.0f >= amax);
          CHECK(sc <= amax / 7.0f * (1.0f + 1.0f / 512) + 6e-8f);  // 2^-24: f16's subnormal step
          for (size_t i = b0; i < std::min(n, b0 + kI4BlockSize); ++i)
            CHECK(std::fabs(back[i] - x[i]) <= sc / 2 * 1.0001f);
        }
      }
    }
  }
  // int8 stores exactly what its grid holds: q x s.
  std::vector<float> x = {127.0f, -63.0f, 1.0f, 0.0f};
  std::vector<uint8_t> b(4), s(4);
  EncodeRow(DType::kI8, x, b.data(), s.data());
  std::vector<float> back(4);
  DecodeRow(DType::kI8, b.data(), s.data(), back);
  CHECK(back == x);
}

TEST_CASE("int8 and int4: a bad scale is found, values never are") {
  std::vector<float> x(64, 0.5f);
  std::vector<uint8_t> b8(64), s8(4), b4(32), s4(4);
  EncodeRow(DType::kI8, x, b8.data(), s8.data());
  EncodeRow(DType::kI4, x, b4.data(), s4.data());
  CHECK(AllFinite(DType::kI8, b8.data(), s8.data(), 64));
  CHECK(AllFinite(DType::kI4, b4.data(), s4.data(), 64));
  CHECK(AllFinite(DType::kI8, b8.data(), nullptr, 64));  // values alone
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(s8.data(), &inf, 4);
  CHECK(FirstNonFinite(DType::kI8, b8.data(), s8.data(), 64) == 0);
  CHECK(!ScalesSafe(DType::kI8, s8.data(), 4));
  const float huge = 1e38f;  // finite, but 127 x it is not; only values of magnitude > 2 overflow
  std::memcpy(s8.data(), &huge, 4);
  CHECK(!ScalesSafe(DType::kI8, s8.data(), 4));
  CHECK(FirstNonFinite(DType::kI8, b8.data(), s8.data(), 64) == 0);  // every q is 127
  const uint16_t nan16 = 0x7E00;
  std::memcpy(s4.data() + 2, &nan16, 2);  // the second block's scale
  CHECK(FirstNonFinite(DType::kI4, b4.data(), s4.data(), 64) == 32);
  CHECK(!ScalesSafe(DType::kI4, s4.data(), 4));
}

TEST_CASE("FirstNonFinite finds every Inf and NaN, at every index and tail length") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    CAPTURE(DTypeName(t));
    const size_t width = t == DType::kF32 ? 4 : t == DType::kF8E4M3 ? 1 : 2;
    for (size_t n : {1u, 3u, 7u, 8u, 9u, 31u, 32u, 33u, 64u, 70u}) {
      CAPTURE(n);
      // Large finite values, both signs: near the top of the dtype's range (all exponent bits
      // but one set); for fp8 a large scale (0xE5) over values up to 448.
      const float big = t == DType::kF8E4M3 ? 1e30f : MaxFinite(t) * 0.99f;
      std::vector<float> row(n);
      for (size_t i = 0; i < n; ++i) row[i] = (i % 2 ? -1.0f : 1.0f) * big / (1 + i % 3);
      std::vector<uint8_t> bytes(n * width), scales((n + kFp8BlockSize - 1) / kFp8BlockSize);
      EncodeRow(t, row, bytes.data(), scales.data());
      CHECK(FirstNonFinite(t, bytes.data(), scales.data(), n) == n);
      CHECK(AllFinite(t, bytes.data(), scales.data(), n));
      for (size_t at = 0; at < n; ++at) {
        for (float bad : {inf, -inf, nan, -nan}) {
          std::vector<uint8_t> b = bytes;
          if (t == DType::kF32) {
            std::memcpy(&b[at * 4], &bad, 4);
          } else if (t == DType::kBF16 || t == DType::kF16) {
            uint16_t v = t == DType::kBF16 ? FloatToBF16(bad) : FloatToF16(bad);
            std::memcpy(&b[at * 2], &v, 2);
          } else {
            b[at] = std::signbit(bad) ? 0xFF : 0x7F;  // e4m3fn has NaN only
          }
          CHECK(FirstNonFinite(t, b.data(), scales.data(), n) == at);
          CHECK(!AllFinite(t, b.data(), scales.data(), n));
        }
      }
    }
  }
  // fp8: a scale of 0xFF is NaN; high scales are finite until value x scale overflows.
  std::vector<uint8_t> v(64, 0x38), sc(2, 127);  // 1.0 x 2^0
  CHECK(FirstNonFinite(DType::kF8E4M3, v.data(), sc.data(), 64) == 64);
  sc[1] = 0xFF;
  CHECK(FirstNonFinite(DType::kF8E4M3, v.data(), sc.data(), 64) == 32);
  sc[1] = 0xF5;  // 2^118: finite
  CHECK(FirstNonFinite(DType::kF8E4M3, v.data(), sc.data(), 64) == 64);
  sc[1] = 0xFE;  // 2^127: 1.0 still finite, 448 x 2^127 is not
  CHECK(FirstNonFinite(DType::kF8E4M3, v.data(), sc.data(), 64) == 64);
  v[40] = 0x7E;  // 448
  CHECK(FirstNonFinite(DType::kF8E4M3, v.data(), sc.data(), 64) == 40);
}

TEST_CASE("JSON parser: values, escapes, exact integers, errors with position") {
  Json j = Json::Parse(
      R"({"a": [1, -2, 3.5, true, null], "s": "x\u00e9\ud83d\ude00\n", "big": 18446744073709551615})",
      "t");
  REQUIRE(j.is_object());
  CHECK(j.Find("a")->items().size() == 5);
  CHECK(j.Find("a")->items()[1].as_int64() == -2);
  CHECK(!j.Find("a")->items()[2].as_int64().has_value());
  CHECK(j.Find("s")->as_string() == "x\xC3\xA9\xF0\x9F\x98\x80\n");
  CHECK(j.Find("big")->as_uint64() == 18446744073709551615ull);
  CHECK_THROWS_AS(Json::Parse("{\"a\": }", "t"), Error);
  CHECK_THROWS_AS(Json::Parse("[1, 2", "t"), Error);
  CHECK_THROWS_AS(Json::Parse("\"\\ud800\"", "t"), Error);  // unpaired surrogate
  CHECK_THROWS_AS(Json::Parse("\"\xff\"", "t"), Error);     // invalid UTF-8
  try {
    Json::Parse("{\n  \"a\": x}", "file.json");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("file.json: line 2 col 8") != std::string::npos);
    CHECK(e.code() == Code::kCorrupt);
  }
  std::string deep(1000, '[');
  CHECK_THROWS_AS(Json::Parse(deep, "t"), Error);  // depth bound, no stack overflow
  CHECK(JsonString("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST_CASE("UTF-8 validation") {
  CHECK(IsValidUtf8("héllo 🎉"));
  CHECK(!IsValidUtf8("\xC0\x80"));          // overlong
  CHECK(!IsValidUtf8("\xED\xA0\x80"));      // surrogate
  CHECK(!IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK(!IsValidUtf8("\xE2\x82"));          // truncated
}

TEST_CASE("ParseSize understands GNU sort units and refuses junk") {
  CHECK(ParseSize("4G", "--memory") == 4ull << 30);
  CHECK(ParseSize("512M", "--memory") == 512ull << 20);
  CHECK(ParseSize("64KiB", "--memory") == 64ull << 10);
  CHECK(ParseSize("1.5K", "--memory") == 1536);
  CHECK(ParseSize("1048576", "--buckets") == 1048576);
  CHECK(ParseSize("1024", "--memory", 'K') == 1024ull * 1024);
  CHECK(ParseSize("50%", "--memory") > 0);
  CHECK_THROWS_AS(ParseSize("", "--memory"), Error);
  CHECK_THROWS_AS(ParseSize("4X", "--memory"), Error);
  CHECK_THROWS_AS(ParseSize("-1", "--memory"), Error);
  CHECK_THROWS_AS(ParseSize("200%", "--memory"), Error);
  CHECK_THROWS_AS(ParseSize("99999999999999999999", "--memory"), Error);
  uint32_t i = 0, n = 0;
  ParseShard("2/5", &i, &n);
  CHECK((i == 2 && n == 5));
  CHECK_THROWS_AS(ParseShard("5/5", &i, &n), Error);
  CHECK_THROWS_AS(ParseShard("1-3", &i, &n), Error);
}

TEST_CASE("checked arithmetic") {
  CHECK(!CheckedAdd(UINT64_MAX, 1).has_value());
  CHECK(!CheckedMul(1ull << 40, 1ull << 40).has_value());
  CHECK(RangeWithin(10, 5, 15));
  CHECK(!RangeWithin(10, 6, 15));
  CHECK(!RangeWithin(UINT64_MAX, 2, UINT64_MAX));
  CHECK(NearestPowerOfTwo(2000000) == 2097152);
  CHECK(NearestPowerOfTwo(1100000) == 1048576);
}

TEST_CASE("TempFile renames on Commit and cleans up otherwise") {
  char dir[] = "/tmp/engram_base_test_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/f";
  {
    TempFile t(path);
    PwriteFull(t.fd(), "abc", 3, 0, t.temp_path());
    CHECK(PathExists(t.temp_path()));
  }
  CHECK(!PathExists(path));
  {
    TempFile t(path);
    PwriteFull(t.fd(), "xyz", 3, 0, t.temp_path());
    t.Commit();
    CHECK(!PathExists(t.temp_path()));
  }
  CHECK(ReadFileToString(path, 100) == "xyz");
  CHECK_THROWS_AS(ReadFileToString(path, 2), Error);
  CHECK_THROWS_AS(ReadFileToString(std::string(dir) + "/missing", 100), Error);
  try {
    UniqueFd fd = OpenFile(dir, O_RDONLY);
    RegularFileSize(fd.get(), dir);
    FAIL("directory accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("is a directory") != std::string::npos);
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("ZeroedBuffer::Grow keeps the contents and zeroes what it adds, allocated or mapped") {
  // 1 MiB (allocated) -> 3 MiB (mapped) -> 64 MiB (remapped).
  ZeroedBuffer b(1 << 20);
  auto* p = static_cast<uint8_t*>(b.data());
  for (size_t i = 0; i < b.size(); ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
  size_t filled = b.size();
  for (size_t bytes : {size_t{3} << 20, size_t{64} << 20}) {
    b.Grow(bytes);
    REQUIRE(b.size() == bytes);
    p = static_cast<uint8_t*>(b.data());
    bool kept = true, zero = true;
    for (size_t i = 0; i < filled; ++i) kept &= p[i] == static_cast<uint8_t>(i * 7 + 1);
    for (size_t i = filled; i < bytes; ++i) zero &= p[i] == 0;
    CHECK(kept);
    CHECK(zero);
    for (size_t i = filled; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
    filled = bytes;
  }
  b.Grow(1 << 20);  // never shrinks
  CHECK(b.size() == size_t{64} << 20);
}

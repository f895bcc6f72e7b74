// Hash vectors: any change to a value here is a table format break (bump version_major).
#include <doctest/doctest.h>

#include <vector>

#include "engram/base/error.h"
#include "engram/hash/addressing.h"
#include "engram/hash/checksum.h"
#include "engram/hash/ngram_hash.h"
#include "engram/hash/numpy_random.h"

using namespace engram;
using namespace engram::hash;

TEST_CASE("native addressing vectors (schemas/table_format.md §4.1)") {
  CHECK(SubtableSeed(0, 1, 2, 0) == 18138406803591306206ull);
  CHECK(SubtableSeed(42, 15, 3, 7) == 8653108942538749451ull);
  uint32_t g2[2] = {1000, 2000}, g3[3] = {5, 6, 7};
  CHECK(NgramHash(g2, 2, SubtableSeed(0, 1, 2, 0)) == 1143309609020889171ull);
  CHECK(NgramHash(g3, 3, SubtableSeed(42, 15, 3, 7)) == 1804266224688866694ull);
  CHECK(OwnerTagSeed(0) == 11952930156294452016ull);
  CHECK(OwnerTag(g2, 2, OwnerTagSeed(0)) == 937027469u);
  CHECK(OwnerTag(g3, 3, OwnerTagSeed(42)) == 1063767579u);

  AddressSpec s;
  s.layer_ids = {1, 15};
  s.max_order = 3;
  s.n_heads = 4;
  s.canonical_vocab = 50000;
  s.log2_buckets = 20;
  Derive(&s);
  const uint32_t ids[5] = {10, 20, 30, 40, 50};
  std::vector<uint64_t> out(5 * 8);
  ComputeBuckets(s, 1, ids, out.data());
  const uint64_t want[40] = {777295, 515739, 67398,  653638, 683849, 141973,  456079, 800901,
                             977840, 7879,   301584, 405423, 880479, 853118,  119771, 176702,
                             745003, 905949, 631424, 512678, 598039, 1000663, 226587, 123005,
                             700975, 540472, 463967, 602982, 339358, 82502,   764213, 861252,
                             918007, 394018, 4101,   472334, 85503,  250617,  242638, 86224};
  for (int i = 0; i < 40; ++i) CHECK(out[i] == want[i]);
}

TEST_CASE("BucketOf agrees with ComputeBuckets, including padded history") {
  for (AddressingMode mode : {AddressingMode::kNative, AddressingMode::kDeepSeek}) {
    AddressSpec s;
    s.mode = mode;
    s.layer_ids = {2, 7, 11};
    s.max_order = 5;
    s.n_heads = 3;
    s.canonical_vocab = 1000;
    s.pad_id = 7;
    s.log2_buckets = 10;
    s.base_sizes = {997, 2000, 3000, 4000};
    Derive(&s);
    std::vector<uint32_t> ids = {5, 999, 0, 7, 7, 123, 456, 789, 1, 2};
    std::vector<uint64_t> out(ids.size() * s.per_layer());
    for (size_t l = 0; l < s.n_layers(); ++l) {
      ComputeBuckets(s, l, ids, out.data());
      uint32_t scratch[kMaxOrder];
      for (size_t t = 0; t < ids.size(); ++t)
        for (uint32_t n = 2; n <= s.max_order; ++n)
          for (uint32_t h = 0; h < s.n_heads; ++h) {
            const uint32_t* g = NgramAt(s, ids, t, n, scratch);
            uint64_t b = BucketOf(s, l, n, h, g);
            REQUIRE(b == out[t * s.per_layer() + (n - 2) * s.n_heads + h]);
            REQUIRE(b < s.sizes[s.SubIndex(l, n, h)]);
          }
    }
  }
}

TEST_CASE("numpy default_rng(seed).integers reproduced bit-exactly") {
  // Expected values printed by numpy: np.random.default_rng(seed).integers(0, high, size=n,
  // dtype=np.int64)
  CHECK(NumpyIntegers(0, 100, 5) == std::vector<int64_t>{85, 63, 51, 26, 30});
  CHECK(NumpyIntegers(10007, 46540883049286, 4) ==
        std::vector<int64_t>{38317237502460, 2420013170957, 17980394323804, 36994817156731});
  CHECK(NumpyIntegers(123456789012345ull, 4294967296, 3) ==
        std::vector<int64_t>{3092319974, 2276362593, 3659815823});
  CHECK(NumpyIntegers(7, 1000, 6) == std::vector<int64_t>{944, 625, 684, 897, 578, 775});
  CHECK(NumpyIntegers(18446744073709551615ull, 9223372036854775807, 3) ==
        std::vector<int64_t>{6272139055050500934, 7796624836349661611, 68281375809169700});
  CHECK(NumpyIntegers(5, 4294967295, 4) ==
        std::vector<int64_t>{2881021351, 3457461229, 97294836, 3470079268});
}

TEST_CASE("DeepSeek-V4.1 vectors") {
  AddressSpec s;
  s.mode = AddressingMode::kDeepSeek;
  s.layer_ids = {1, 14};
  s.max_order = 4;
  s.n_heads = 8;
  s.canonical_vocab = 99092;
  s.base_sizes = {16000000};
  Derive(&s);
  CHECK(s.multipliers == std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349,
                                              73987337458391, 67716810739261, 51510806800915,
                                              30921347202721, 82619226485591});
  REQUIRE(s.sizes.size() == 48);
  CHECK(s.sizes[0] == 16000057);
  CHECK(s.sizes[1] == 16000079);
  CHECK(s.sizes[2] == 16000081);
  CHECK(s.sizes[45] == 16000877);
  CHECK(s.sizes[46] == 16000879);
  CHECK(s.sizes[47] == 16000889);
  uint64_t t0 = 0, t1 = 0;
  for (int i = 0; i < 24; ++i) {
    t0 += s.sizes[i];
    t1 += s.sizes[24 + i];
  }
  CHECK(t0 == 384006168);
  CHECK(t1 == 384016682);
}

TEST_CASE("engram-demo DeepSeek buckets match the numpy reference") {
  // scripts/reference/engram_hash_ref.py --layers 1,15 --max-order 3 --heads 4 --base 646400
  //   --vocab 98627 --pad 2 over ids 10 20 30 40 50, layer 1.
  AddressSpec s;
  s.mode = AddressingMode::kDeepSeek;
  s.layer_ids = {1, 15};
  s.max_order = 3;
  s.n_heads = 4;
  s.canonical_vocab = 98627;
  s.base_sizes = {646400};
  s.pad_id = 2;
  Derive(&s);
  const uint32_t ids[5] = {10, 20, 30, 40, 50};
  std::vector<uint64_t> out(40);
  ComputeBuckets(s, 0, ids, out.data());
  const uint64_t want[40] = {333479, 339243, 28077,  138866, 288707, 400912, 118598, 91083,
                             184959, 81546,  437077, 465085, 366630, 49502,  201227, 463501,
                             9511,   527709, 580949, 81374,  97352,  335104, 380104, 519693,
                             75563,  442366, 68304,  421160, 590131, 538966, 425695, 273718,
                             470497, 24007,  86608,  181886, 225755, 97691,  143436, 246839};
  for (int i = 0; i < 40; ++i) CHECK(out[i] == want[i]);
  CHECK(s.multipliers[0] == 76993395940407);
  CHECK(s.sizes[0] == 646403);
}

TEST_CASE("primes and parameter validation") {
  CHECK(IsPrime(2));
  CHECK(IsPrime(16000057));
  CHECK(!IsPrime(16000059));
  CHECK(IsPrime(18446744073709551557ull));  // largest 64-bit prime
  CHECK(!IsPrime(3215031751ull));           // strong pseudoprime to bases 2,3,5,7
  AddressSpec s;
  s.canonical_vocab = 10;
  CHECK_THROWS_AS(Derive(&s), Error);  // no layers
  s.layer_ids = {1, 1};
  CHECK_THROWS_AS(Derive(&s), Error);  // duplicate layer
  s.layer_ids = {1};
  s.max_order = 9;
  CHECK_THROWS_AS(Derive(&s), Error);
  s.max_order = 3;
  s.pad_id = 10;
  CHECK_THROWS_AS(Derive(&s), Error);  // pad outside vocab
}

TEST_CASE("checksum streaming equals one-shot") {
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  Checksum64Stream s;
  s.Update(data.data(), 333);
  s.Update(data.data() + 333, data.size() - 333);
  CHECK(s.Digest() == Checksum64(data.data(), data.size()));
  CHECK(Checksum64("", 0) == 0x2D06800538D394C2ull);  // XXH3-64 of the empty input
  // Pieces of every size class (the vector builds take those of 1 KiB and more), after Reset.
  for (size_t piece : {1u, 100u, 1023u, 1024u, 4096u, 32768u}) {
    CAPTURE(piece);
    s.Reset();
    for (size_t at = 0; at < data.size(); at += piece)
      s.Update(data.data() + at, std::min(piece, data.size() - at));
    CHECK(s.Digest() == Checksum64(data.data(), data.size()));
  }
  // The seeded checksum (journal records) on long inputs: seed 0 is the unseeded XXH3, and other
  // seeds give other values.
  for (size_t n : {241u, 600u, 1024u, 4097u, 100000u}) {
    CHECK(Checksum64Seeded(data.data(), n, 0) == Checksum64(data.data(), n));
    CHECK(Checksum64Seeded(data.data(), n, 7) != Checksum64Seeded(data.data(), n, 8));
  }
}

#include <random>

#include "engram/hash/checksum.h"
#include "engram/hash/xxh3_short.h"

TEST_CASE("the host/device XXH3 of xxh3_short.h equals libxxhash for 4..32-byte inputs") {
  std::mt19937_64 rng(11);
  uint8_t buf[32];
  for (int iter = 0; iter < 200000; ++iter) {
    uint32_t len = 4 + static_cast<uint32_t>(rng() % 29);
    for (uint32_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(rng());
    uint64_t seed = iter % 3 == 0 ? 0 : rng();
    REQUIRE(xxh3::Hash4To32(buf, len, seed, Xxh3Secret()) == Checksum64Seeded(buf, len, seed));
  }
}

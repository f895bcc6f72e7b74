// build at scale: spilled counting equals in-memory counting, shards merge into the one-process
// table, sketch owners agree with exact ones wherever a strict majority exists, temp files go.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../test_util.h"
#include "engram/base/error.h"
#include "engram/builder/build.h"
#include "engram/format/reader.h"
#include "engram/table/inspect.h"
#include "engram/table/verify.h"

using namespace engram;
using namespace engram::table;
using namespace engram::format;
using namespace engram::builder;
using engram::testing::TempDir;

namespace {

std::string WriteCorpus(const TempDir& d, size_t tokens, uint32_t vocab, uint64_t seed, bool zipf) {
  std::vector<uint32_t> v;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t i = 0; i < tokens; ++i) {
    if (rng() % 500 == 0) v.push_back(kDocSeparator);
    uint32_t id =
        zipf ? static_cast<uint32_t>(std::min<double>(vocab - 1, std::pow(u(rng), -1.3) - 1))
             : static_cast<uint32_t>(rng() % vocab);
    v.push_back(id);
  }
  std::string p = d / ("c" + std::to_string(seed) + ".u32");
  base::TempFile t(p);
  base::PwriteFull(t.fd(), v.data(), v.size() * 4, 0, t.temp_path());
  t.Commit();
  return p;
}

BuildOptions Opts(const std::string& corpus, const std::string& out, uint32_t vocab) {
  BuildOptions o;
  o.output = out;
  o.token_files = {corpus};
  o.layout.layer_ids = std::vector<uint32_t>{1, 2};
  o.layout.max_order = 3;
  o.layout.n_heads = 2;
  o.layout.buckets = 4096;
  o.layout.row_dim = 8;
  o.layout.vocab_size = vocab;
  o.init = "normal";
  o.init_seed = 3;
  o.threads = 2;
  return o;
}

// Every section but PROVENANCE (which records how the table was made) must be identical.
void RequireSameData(const std::string& a, const std::string& b) {
  auto ra = Reader::Open(a), rb = Reader::Open(b);
  for (SectionType t : {SectionType::kLayout, SectionType::kCanonMap, SectionType::kRows,
                        SectionType::kScales, SectionType::kTags, SectionType::kStats}) {
    auto x = ra->Section(t), y = rb->Section(t);
    INFO(SectionName(static_cast<uint32_t>(t)));
    REQUIRE(x.size() == y.size());
    // An absent section is an empty span with a null data(); memcmp must not see it.
    if (!x.empty()) CHECK(std::memcmp(x.data(), y.data(), x.size()) == 0);
  }
}

size_t SpillFiles(const std::string& dir) {
  size_t n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind("engram-build.", 0) == 0;
  closedir(d);
  return n;
}

}  // namespace

TEST_CASE("a build that spills to disk equals one that counts in memory") {
  TempDir d;
  std::string c = WriteCorpus(d, 1500000, 60000, 1, false);
  BuildOptions mem = Opts(c, d / "mem.engram", 60000);
  BuildResult r1 = Build(mem, base::Silent());
  BuildOptions spill = Opts(c, d / "spill.engram", 60000);
  spill.memory_bytes = 32ull << 20;  // 16 MiB per thread: several runs each
  spill.temp_dir = d.path();
  spill.block_tokens = 100000;
  BuildResult r2 = Build(spill, base::Silent());
  CHECK(r1.ngrams_distinct == r2.ngrams_distinct);
  CHECK(r1.spill_runs == 0);
  // 16 MiB per thread: a counter doubles in place (adding its own size), and the next doubling
  // of one order would not fit once it holds a few hundred thousand n-grams, so each thread
  // spills both orders several times. A counter that spilled at every check after its first
  // spill wrote over a thousand tiny runs here.
  CAPTURE(r2.spill_runs);
  CHECK(r2.spill_runs >= 8);
  CHECK(r2.spill_runs <= 40);
  RequireSameData(mem.output, spill.output);
  CHECK(SpillFiles(d.path()) == 0);
  // ~180 distinct n-grams per row: inspect --stats bins loads by powers of two.
  InspectInfo in = Inspect(mem.output, {true, true});
  uint64_t rows = 0;
  for (uint64_t v : in.load_log2_histogram) rows += v;
  CHECK(rows == in.total_rows);
  REQUIRE(in.load_max >= 128);
  CHECK(in.load_log2_histogram.size() == 33u - static_cast<unsigned>(__builtin_clz(in.load_max)));
  CHECK(in.load_log2_histogram.back() > 0);
  CHECK(in.load_sum == r1.ngrams_distinct * 4);  // one row in each of 2 layers x 2 heads
  const size_t top = in.load_log2_histogram.size() - 1;
  CHECK(in.ToText().find(std::to_string(1ull << (top - 1)) + "-" +
                         std::to_string((1ull << top) - 1)) != std::string::npos);
  // Nor do the thread count and the block size change the table.
  BuildOptions one = Opts(c, d / "one.engram", 60000);
  one.threads = 1;
  one.block_tokens = 777777;
  Build(one, base::Silent());
  RequireSameData(mem.output, one.output);
  // Three threads split the n-grams three ways, each share spilling on its own.
  BuildOptions three = spill;
  three.threads = 3;
  three.memory_bytes = 48ull << 20;
  three.output = d / "three.engram";
  BuildResult r3 = Build(three, base::Silent());
  CHECK(r3.spill_runs >= 6);  // every share spilled both orders
  RequireSameData(mem.output, three.output);
  CHECK(SpillFiles(d.path()) == 0);
}

TEST_CASE("N shards merged equal one build (exact and sketch)") {
  TempDir d;
  std::string c = WriteCorpus(d, 400000, 3000, 2, true);
  for (std::string mode : {"exact", "sketch"}) {
    BuildOptions one = Opts(c, d / ("one-" + mode + ".engram"), 3000);
    one.owners = mode;
    one.block_tokens = 30000;
    Build(one, base::Silent());
    BuildOptions alt = one;  // other block size and thread count: the same table
    alt.block_tokens = 77777;
    alt.threads = 1;
    alt.output = d / ("alt-" + mode + ".engram");
    Build(alt, base::Silent());
    RequireSameData(one.output, alt.output);
    std::vector<std::string> parts;
    for (uint32_t i = 0; i < 3; ++i) {
      BuildOptions s = one;
      s.shard_index = i;
      s.shard_count = 3;
      s.output = d / (mode + std::to_string(i) + ".part");
      Build(s, base::Silent());
      parts.push_back(s.output);
    }
    MergeOptions m;
    m.parts = {parts[2], parts[0], parts[1]};  // any order
    m.output = d / ("merged-" + mode + ".engram");
    BuildResult r = Merge(m, base::Silent());
    CHECK(r.tokens > 390000);
    RequireSameData(one.output, m.output);
    CHECK(Verify(m.output, {}, base::Silent()).ok());
    // A missing or repeated shard is refused by name.
    m.parts = {parts[0], parts[1]};
    CHECK_THROWS_WITH_AS(Merge(m, base::Silent()), doctest::Contains("shard 2/3 is missing"),
                         Error);
    m.parts = {parts[0], parts[1], parts[1]};
    CHECK_THROWS_WITH_AS(Merge(m, base::Silent()), doctest::Contains("are both shard 1/3"), Error);
  }
}

TEST_CASE("owners chosen in passes over the sub-tables equal owners chosen in one") {
  // A table whose owner cells exceed half of --memory has them chosen a few sub-tables at a
  // time, the records read again for each pass: in memory, from spill runs, from parts.
  TempDir d;
  std::string c = WriteCorpus(d, 1500000, 60000, 5, false);
  BuildOptions one = Opts(c, d / "one.engram", 60000);
  BuildResult r1 = Build(one, base::Silent());
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 2; ++i) {
    BuildOptions s = one;
    s.shard_index = i;
    s.shard_count = 2;
    s.output = d / ("p" + std::to_string(i) + ".part");
    Build(s, base::Silent());
    parts.push_back(s.output);
  }
  // 8 sub-tables of 4,096 rows: passes of 3, 3 and 2, across orders and layers.
  ::setenv("ENGRAM_TEST_OWNER_PASS_BYTES", std::to_string(3 * 4096 * 16).c_str(), 1);
  BuildOptions passes = Opts(c, d / "passes.engram", 60000);
  BuildResult r2 = Build(passes, base::Silent());
  BuildOptions spill = Opts(c, d / "spill.engram", 60000);
  spill.memory_bytes = 32ull << 20;
  spill.block_tokens = 100000;
  spill.temp_dir = d.path();
  BuildResult r3 = Build(spill, base::Silent());
  MergeOptions m;
  m.parts = parts;
  m.output = d / "merged.engram";
  BuildResult r4 = Merge(m, base::Silent());
  ::unsetenv("ENGRAM_TEST_OWNER_PASS_BYTES");
  CHECK(r3.spill_runs > 0);
  RequireSameData(one.output, passes.output);
  RequireSameData(one.output, spill.output);
  RequireSameData(one.output, m.output);
  CHECK(r1.ngrams_distinct == r2.ngrams_distinct);
  CHECK(r1.ngrams_distinct == r3.ngrams_distinct);
  CHECK(r1.ngrams_distinct == r4.ngrams_distinct);
  CHECK(r1.owned_rows == r2.owned_rows);
  CHECK(SpillFiles(d.path()) == 0);
}

TEST_CASE("sketch owners agree with exact owners wherever a strict majority exists") {
  TempDir d;
  std::string c = WriteCorpus(d, 300000, 2000, 3, true);
  BuildOptions ex = Opts(c, d / "exact.engram", 2000);
  BuildOptions sk = Opts(c, d / "sketch.engram", 2000);
  sk.owners = "sketch";
  Build(ex, base::Silent());
  Build(sk, base::Silent());
  auto re = Reader::Open(ex.output), rs = Reader::Open(sk.output);
  CHECK((rs->header().optional_flags & kOptSketchOwners) != 0);
  uint64_t majority = 0, agree = 0;
  for (uint64_t row = 0; row < re->layout().total_rows; ++row) {
    StatsRow s = re->Stats(row);
    CHECK(rs->Stats(row).total_count == s.total_count);  // totals are exact in both modes
    if (s.total_count == 0 || 2ull * s.owner_count <= s.total_count) continue;
    ++majority;
    agree += rs->Tag(row) == re->Tag(row);
  }
  CHECK(majority > 1000);
  CHECK(agree == majority);
}

TEST_CASE("a failing build leaves no table and no spill files") {
  TempDir d;
  std::string c = WriteCorpus(d, 600000, 50000, 4, false);
  // Append an id outside the vocabulary at the very end: counting fails after spills.
  {
    base::UniqueFd fd = base::OpenFile(c, O_WRONLY | O_APPEND);
    uint32_t bad = 99999999;
    base::PwriteFull(fd.get(), &bad, 4, base::RegularFileSize(fd.get(), c), c);
  }
  BuildOptions o = Opts(c, d / "t.engram", 50000);
  o.memory_bytes = 32ull << 20;
  o.temp_dir = d.path();
  o.block_tokens = 50000;
  CHECK_THROWS_WITH_AS(Build(o, base::Silent()),
                       doctest::Contains("outside the canonical vocabulary"), Error);
  CHECK(!base::PathExists(o.output));
  CHECK(SpillFiles(d.path()) == 0);
}

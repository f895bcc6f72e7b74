// Hot-set sizing: the stack-distance curve equals an LRU cache simulated at every size.
#include "engram/table/hotset.h"

#include <doctest/doctest.h>

#include <list>
#include <random>
#include <unordered_map>

#include "../test_util.h"

namespace engram::testing {

namespace {

// Hits of an LRU cache of `size` rows over the trace, by brute force.
uint64_t LruHits(const std::vector<uint64_t>& trace, size_t size) {
  std::list<uint64_t> order;  // most recent first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  uint64_t hits = 0;
  for (uint64_t r : trace) {
    auto it = where.find(r);
    if (it != where.end()) {
      ++hits;
      order.erase(it->second);
    } else if (order.size() == size) {
      where.erase(order.back());
      order.pop_back();
    }
    order.push_front(r);
    where[r] = order.begin();
  }
  return hits;
}

}  // namespace

TEST_CASE("the hot-set curve equals an LRU cache simulated at every size") {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> trace;
  for (int i = 0; i < 6000; ++i) {  // skewed: a few hot rows, a long tail, some bursts
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    uint64_t row = static_cast<uint64_t>(std::pow(u, 3.0) * 300) * 7919 % 100003;
    if (i % 50 < 5) row = 424242 + i % 5;
    trace.push_back(row);
  }
  const auto r = table::Hotset(trace, 100, 1 << 20);
  REQUIRE(r.lookups == trace.size());
  uint64_t distinct = std::unordered_map<uint64_t, int>().size();
  {
    std::unordered_map<uint64_t, int> seen;
    for (uint64_t x : trace) seen[x] = 1;
    distinct = seen.size();
  }
  CHECK(r.distinct_rows == distinct);
  for (size_t c = 1; c <= distinct + 1; ++c) {
    const double want = static_cast<double>(LruHits(trace, c)) / static_cast<double>(trace.size());
    INFO("cache of " << c << " rows");
    CHECK(r.HitRate(c) == doctest::Approx(want).epsilon(1e-12));
  }
  // The full cache misses only first touches.
  CHECK(r.HitRate(distinct) == doctest::Approx(1.0 - r.first_touch()));
  // The curve: at least 20 sizes, increasing, each point exact, bytes = rows x bytes per row.
  REQUIRE(r.curve.size() >= 20);
  for (size_t i = 0; i < r.curve.size(); ++i) {
    if (i) CHECK(r.curve[i].rows > r.curve[i - 1].rows);
    CHECK(r.curve[i].bytes == r.curve[i].rows * 100);
    CHECK(r.curve[i].hit_rate == doctest::Approx(r.HitRate(r.curve[i].rows)).epsilon(1e-12));
  }
  CHECK(r.curve.back().rows == distinct);
  // The smallest cache for a rate reaches it, and one row less does not.
  const double target = 0.5 * (1.0 - r.first_touch());
  const uint64_t rows = r.RowsFor(target);
  REQUIRE(rows > 0);
  CHECK(r.HitRate(rows) >= target);
  if (rows > 1) CHECK(r.HitRate(rows - 1) < target);
  CHECK(r.RowsFor(1.0) == 0);  // first touches: no cache reaches 100%
}

TEST_CASE("the row trace reads every layer, order and head at every position") {
  const format::Layout l =
      SmallLayout(base::DType::kF32, hash::AddressingMode::kNative, 6, 32, {1, 3}, 3, 2);
  const auto trace = table::RowTrace(l, {{5, 6, 7}, {8, 9}});
  CHECK(trace.size() == 5 * 2 * 2 * 2);  // positions x layers x orders (2, 3) x heads
  for (uint64_t row : trace) CHECK(row < l.total_rows);
}

}  // namespace engram::testing

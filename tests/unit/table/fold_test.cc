// The in-place fold (schemas/table_format.md §5.8): the same table as the rewrite, writes that
// grow with the journal and not the table, and readers that never see two states in a request.
#include "engram/table/fold.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "../test_util.h"
#include "engram/format/fold_lock.h"
#include "engram/format/view.h"
#include "engram/table/append.h"
#include "engram/table/verify.h"

namespace engram::testing {
namespace {

// A JSONL file of bigram entries [a, b] for a in [0, n), every value `v`.
void WriteEntries(const std::string& path, uint32_t n, uint32_t b, float v, uint32_t row_dim) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  for (uint32_t a = 0; a < n; ++a) {
    std::fprintf(f, "{\"canonical_ids\": [%u, %u], \"value\": [", a, b);
    for (uint32_t i = 0; i < row_dim; ++i) std::fprintf(f, "%s%g", i ? ", " : "", v);
    std::fprintf(f, "]}\n");
  }
  std::fclose(f);
}

void AppendFile(const std::string& table, const std::string& entries) {
  table::AppendOptions o;
  o.table = table;
  o.entries = entries;
  table::Append(o, base::Silent());
}

table::FoldResult Fold(const std::string& table, bool rewrite) {
  table::FoldOptions o;
  o.table = table;
  o.rewrite = rewrite;
  o.threads = 1;
  return table::SortBuckets(o, base::Silent());
}

void RequireSameRows(const std::string& a, const std::string& b) {
  auto ra = format::Reader::Open(a), rb = format::Reader::Open(b);
  const format::Layout& l = ra->layout();
  for (auto t :
       {format::SectionType::kRows, format::SectionType::kTags, format::SectionType::kStats}) {
    auto sa = ra->Section(t), sb = rb->Section(t);
    REQUIRE(sa.size() == sb.size());
    CHECK(std::memcmp(sa.data(), sb.data(), sa.size()) == 0);
  }
  CHECK(ra->Facts().size() == rb->Facts().size());
  CHECK(l.total_rows == rb->layout().total_rows);
}

}  // namespace

TEST_CASE("an in-place fold makes the table the rewrite makes, writing only the journal's pages") {
  TempDir d;
  // 96-byte rows: some run across a page boundary. Pages are patched 5 at a time, so that rows
  // also run across batches.
  ::setenv("ENGRAM_TEST_FOLD_PAGE_BATCH", "5", 1);
  const format::Layout l = SmallLayout(base::DType::kF32, hash::AddressingMode::kNative, 14, 24);
  WriteTable(d / "a.engram", l, true, {}, 16);  // 16384 rows, 2 MiB of rows, 64 KiB chunks
  WriteEntries(d / "e1.jsonl", 200, 7, 0.5f, l.row_dim);
  WriteEntries(d / "e2.jsonl", 100, 7, 1.5f, l.row_dim);  // rewrites 100 of the 200 rows
  AppendFile(d / "a.engram", d / "e1.jsonl");
  AppendFile(d / "a.engram", d / "e2.jsonl");
  std::filesystem::copy_file(d / "a.engram", d / "b.engram");
  const table::FoldResult in_place = Fold(d / "a.engram", false);
  const table::FoldResult rewrite = Fold(d / "b.engram", true);
  CHECK(in_place.in_place);
  CHECK_FALSE(rewrite.in_place);
  CHECK(in_place.entries == 300);
  CHECK(in_place.rows == rewrite.rows);
  CHECK(in_place.rows > 190);  // 200 n-grams, a few may share a bucket
  RequireSameRows(d / "a.engram", d / "b.engram");
  // 200 rows of 96 bytes touch at most 400 row pages, a tags page or two and 200 stats pages;
  // the metadata tail is written twice (staged, then home), the header twice, the slot page
  // thrice: far less than the table (3.4 MiB).
  CHECK(in_place.bytes_written < 640 * format::kSumPage);
  ::unsetenv("ENGRAM_TEST_FOLD_PAGE_BATCH");
  for (const char* t : {"a.engram", "b.engram"}) {
    table::VerifyReport rep = table::Verify(d / t, {}, base::Silent());
    for (const auto& p : rep.problems) INFO(p.message);
    CHECK(rep.ok());
  }
  auto v = format::TableView::Open(d / "a.engram");  // deterministic: the journal is empty
  CHECK(v->journal().n_committed == 0);
  CHECK(v->reader().header().file_size == v->reader().file_length());
  CHECK(Fold(d / "a.engram", false).nothing_to_do);
}

TEST_CASE("a reader holding the fold lock never sees rows of two table states in one request") {
  TempDir d;
  const format::Layout l = SmallLayout(base::DType::kF32, hash::AddressingMode::kNative, 10);
  const std::string t = d / "t.engram";
  WriteTable(t, l, true, {}, 12);
  const uint32_t kRows = 24;
  WriteEntries(d / "e.jsonl", kRows, 3, 0.0f, l.row_dim);
  AppendFile(t, d / "e.jsonl");
  std::vector<uint64_t> rows;
  {
    auto v = format::TableView::Open(t, {false, {}});
    std::set<uint64_t> s;
    for (const auto& e : v->journal().committed) s.insert(e.row);
    rows.assign(s.begin(), s.end());
  }
  Fold(t, false);
  REQUIRE(rows.size() >= 8);

  std::atomic<bool> done{false};
  std::atomic<int> requests{0}, mixed{0}, reloads{0};
  std::thread reader([&] {
    format::ViewOptions vo;
    vo.deterministic_addressing = false;
    std::shared_ptr<format::TableView> view = format::TableView::Open(t, vo);
    struct stat st0 {};
    ::stat(t.c_str(), &st0);
    std::vector<float> row(l.row_dim);
    while (!done.load()) {
      // As serve does per batch: lock the file of the view in use, reload when it changed.
      format::FoldReadLock lock(view->reader().fd(), /*yield=*/true);
      struct stat st {};
      ::stat(t.c_str(), &st);
      if (st.st_size != st0.st_size || st.st_mtim.tv_nsec != st0.st_mtim.tv_nsec ||
          st.st_mtim.tv_sec != st0.st_mtim.tv_sec) {
        view = format::TableView::Open(t, vo);
        st0 = st;
        reloads++;
      }
      // One request, long enough for an append and a fold to run beside it: read every row, ten
      // times, a millisecond apart; all must hold one value.
      float first = -1;
      bool bad = false;
      for (int pass = 0; pass < 10; ++pass) {
        for (uint64_t r : rows) {
          view->DecodeRowTo(r, row);
          if (first < 0) first = row[0];
          for (float x : row) bad |= x != first;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (bad) mixed++;
      requests++;
    }
  });
  for (int i = 1; i <= 100; ++i) {
    WriteEntries(d / "e.jsonl", kRows, 3, static_cast<float>(i), l.row_dim);
    AppendFile(t, d / "e.jsonl");
    CHECK(Fold(t, false).in_place);
  }
  done = true;
  reader.join();
  MESSAGE("requests " << requests.load() << ", reloads " << reloads.load());
  CHECK(requests.load() > 0);
  CHECK(mixed.load() == 0);
  table::VerifyReport rep = table::Verify(t, {}, base::Silent());
  CHECK(rep.ok());
}

}  // namespace engram::testing

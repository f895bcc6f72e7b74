// Checker for scripts/crash_test.sh. Batches are append entry files (JSONL with canonical_ids,
// value and "note": "batch K") applied in order K = 0, 1, 2, ...
//   crash_check TABLE BATCH_DIR journal           prints the batch ids found in the journal
//   crash_check TABLE BATCH_DIR check K1,K2,...   checks the table holds exactly what the
//                                                 listed (committed) batches wrote, last writer
//                                                 wins; exit 1 with the first difference
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/format/view.h"
#include "engram/hash/addressing.h"
#include "engram/hash/ngram_hash.h"

using namespace engram;

namespace {
struct Item {
  std::vector<uint32_t> ids;
  std::vector<float> value;
};

std::vector<Item> ReadBatch(const std::string& path) {
  std::vector<Item> out;
  std::string text = base::ReadFileToString(path, 1ull << 30);
  for (size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    if (q == p) continue;
    base::Json j = base::Json::Parse(text.substr(p, q - p), path);
    Item it;
    for (const auto& x : j.Find("canonical_ids")->items())
      it.ids.push_back(static_cast<uint32_t>(*x.as_uint64()));
    for (const auto& x : j.Find("value")->items())
      it.value.push_back(static_cast<float>(x.as_double()));
    out.push_back(std::move(it));
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::string table = argv[1], dir = argv[2], mode = argv[3];
  format::ViewOptions vo;
  vo.deterministic_addressing = false;
  auto view = format::TableView::Open(table, vo);
  const format::Layout& l = view->layout();
  if (mode == "journal") {
    // A batch's entries are identified by their first canonical id (batch K uses K + 2).
    std::map<uint32_t, size_t> seen;
    for (const auto& e : view->journal().committed) seen[e.ids[0] - 2]++;
    for (const auto& [k, n] : seen) std::printf("%u %zu\n", k, n);
    return 0;
  }
  std::vector<uint32_t> batches;
  if (argc > 4) {
    std::string list = argv[4];
    for (size_t p = 0, q; p < list.size(); p = q + 1) {
      q = list.find(',', p);
      if (q == std::string::npos) q = list.size();
      if (q > p) batches.push_back(static_cast<uint32_t>(std::stoul(list.substr(p, q - p))));
    }
  }
  struct Want {
    uint32_t tag;
    std::vector<float> value;
    uint32_t batch;
  };
  std::map<uint64_t, Want> want;
  for (uint32_t k : batches)
    for (const Item& it : ReadBatch(dir + "/batch_" + std::to_string(k) + ".jsonl")) {
      uint32_t n = static_cast<uint32_t>(it.ids.size());
      uint32_t tag = hash::OwnerTag(it.ids.data(), n, l.owner_tag_seed);
      for (size_t li = 0; li < l.spec.n_layers(); ++li)
        for (uint32_t h = 0; h < l.spec.n_heads; ++h) {
          uint64_t row =
              l.RowOf(l.spec.SubIndex(li, n, h), hash::BucketOf(l.spec, li, n, h, it.ids.data()));
          want[row] = {tag, it.value, k};
        }
    }
  std::vector<float> got(l.row_dim);
  for (const auto& [row, w] : want) {
    view->DecodeRowTo(row, got);
    if (view->Tag(row) != w.tag || std::memcmp(got.data(), w.value.data(), got.size() * 4) != 0) {
      std::printf(
          "LOST: row %llu should hold batch %u's entry (tag %08x, value %g), holds tag %08x value "
          "%g\n",
          static_cast<unsigned long long>(row), w.batch, w.tag, w.value[0], view->Tag(row), got[0]);
      return 1;
    }
  }
  std::printf("ok: %zu rows from %zu committed batches present\n", want.size(), batches.size());
  return 0;
}

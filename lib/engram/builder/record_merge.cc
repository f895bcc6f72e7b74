// The k-way merge of sorted record streams (a heap over the sources' current records).
#include "engram/builder/record_merge.h"

#include <queue>

namespace engram::builder {

void KWayMerge(std::vector<std::unique_ptr<Source>>& sources, uint32_t n, const RecordSink& sink,
               const std::function<void(uint64_t)>& on_consumed) {
  uint64_t consumed = 0;
  auto greater = [&](size_t a, size_t b) {
    return CompareIds(sources[a]->ids(), sources[b]->ids(), n) > 0;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(greater)> heap(greater);
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i]->Next()) heap.push(i);
  std::vector<uint32_t> cur(n);
  while (!heap.empty()) {
    size_t i = heap.top();
    heap.pop();
    std::memcpy(cur.data(), sources[i]->ids(), n * 4);
    uint64_t total = sources[i]->count();
    if (sources[i]->Next()) heap.push(i);
    ++consumed;
    while (!heap.empty() && CompareIds(sources[heap.top()]->ids(), cur.data(), n) == 0) {
      size_t j = heap.top();
      heap.pop();
      total += sources[j]->count();
      if (sources[j]->Next()) heap.push(j);
      ++consumed;
    }
    sink(cur.data(), total);
    if (consumed >= kMergeProgressEvery && on_consumed) {
      on_consumed(consumed);
      consumed = 0;
    }
  }
  if (consumed && on_consumed) on_consumed(consumed);
}

}  // namespace engram::builder

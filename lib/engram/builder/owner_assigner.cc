// OwnerAssigner: record chunks applied to the table's owner cells, one sub-table a task.
#include "engram/builder/owner_assigner.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "engram/builder/owner_cells.h"

namespace engram::builder {

bool OwnerPass::HasOrder(const format::Layout& l, uint32_t n) const {
  for (size_t li = 0; li < l.spec.n_layers(); ++li) {
    const size_t first = l.spec.SubIndex(li, n, 0), last = first + l.spec.n_heads;
    if (first < end && last > begin) return true;
  }
  return false;
}

std::vector<OwnerPass> PlanOwnerPasses(const format::Layout& l, uint64_t budget) {
  const size_t subs = l.spec.n_subtables();
  const uint64_t budget_rows = std::max<uint64_t>(budget / sizeof(RowState), 1);
  std::vector<OwnerPass> passes;
  for (size_t b = 0; b < subs;) {
    size_t e = b + 1;
    while (e < subs && l.SubtableBegin(e + 1) - l.SubtableBegin(b) <= budget_rows) ++e;
    passes.push_back({b, e, l.SubtableBegin(b), l.SubtableBegin(e)});
    b = e;
  }
  return passes;
}

uint64_t OwnerCellBudget(uint64_t memory) {
  // ENGRAM_TEST_OWNER_PASS_BYTES=N: passes of N bytes, so that tests on small tables take several.
  const char* e = std::getenv("ENGRAM_TEST_OWNER_PASS_BYTES");
  if (e && std::atoll(e) > 0) return static_cast<uint64_t>(std::atoll(e));
  return std::max<uint64_t>(memory / 2, 64ull << 20);
}

OwnerAssigner::OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads,
                             const OwnerPass* pass)
    : l_(layout), oa_(arrays), threads_(threads), pass_(pass) {
  counts_.resize(kAssignChunk);
  tags_.resize(kAssignChunk);
}

void OwnerAssigner::BeginOrder(uint32_t order) {
  Flush();
  order_ = order;
  ids_.resize(kAssignChunk * order);
}

void OwnerAssigner::Add(const uint32_t* ids, uint64_t count) {
  std::memcpy(&ids_[n_ * order_], ids, order_ * 4);
  counts_[n_] = count;
  if (++n_ == kAssignChunk) Flush();
}

void OwnerAssigner::Flush() {
  if (n_ == 0) return;
  const hash::AddressSpec& s = l_.spec;
  const uint32_t n = order_;
  const int64_t m = static_cast<int64_t>(n_);
  const uint32_t* ids = ids_.data();
  uint32_t* tags = tags_.data();
  // Owner tags do not depend on the sub-table: once per record, not once per head.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t k = 0; k < m; ++k) tags[k] = hash::OwnerTag(ids + k * n, n, l_.owner_tag_seed);
  // One job per sub-table of this order: rows of different jobs never meet.
  const int64_t jobs = static_cast<int64_t>(s.n_layers() * s.n_heads);
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (int64_t job = 0; job < jobs; ++job) {
    if (pass_ && !pass_->Has(s.SubIndex(static_cast<size_t>(job) / s.n_heads, n,
                                        static_cast<uint32_t>(job % s.n_heads))))
      continue;
    try {
      ApplyToSubTable(l_, TableCells{oa_}, static_cast<size_t>(job) / s.n_heads,
                      static_cast<uint32_t>(job % s.n_heads), n, ids, counts_.data(), tags, m);
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  n_ = 0;
}

}  // namespace engram::builder

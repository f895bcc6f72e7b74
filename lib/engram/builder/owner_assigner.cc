// OwnerAssigner: record chunks applied to the table's owner cells, one sub-table a task.
#include "engram/builder/owner_assigner.h"

#include <omp.h>

#include <exception>

#include "engram/builder/owner_cells.h"

namespace engram::builder {

OwnerAssigner::OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads)
    : l_(layout), oa_(arrays), threads_(threads) {
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
  ++distinct_;
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

// RowGatherer: bucket ids at the step's entry, rows and owner-tag hits on a side thread.
#include "engram/model/gather.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "engram/hash/addressing.h"
#include "engram/hash/ngram_hash.h"
#include "engram/table/gather.h"

namespace engram::model {

RowGatherer::~RowGatherer() {
  if (worker_.joinable()) worker_.join();
}

void RowGatherer::Start(const std::vector<std::vector<uint32_t>>& seqs, int T,
                        const std::vector<uint8_t>& valid) {
  const format::Layout& l = view_.layout();
  const size_t B = seqs.size(), per = l.spec.per_layer(), layers = table_layer_.size();
  B_ = B;
  T_ = T;
  buckets_.assign(layers, std::vector<uint64_t>(B * T * per, 0));
  full_.assign(B * T * (l.spec.max_order - 1), 0);
  tags_.assign(B * T * (l.spec.max_order - 1), 0);
  uint32_t scratch[hash::kMaxOrder];
  std::vector<uint64_t> tmp;
  for (size_t b = 0; b < B; ++b) {
    const auto& s = seqs[b];
    int real = 0;
    for (int t = 0; t < T; ++t) real += valid[b * T + t];
    size_t ctx = std::min<size_t>(s.size() - real, l.spec.max_order - 1);
    std::span<const uint32_t> span(s.data() + s.size() - real - ctx, real + ctx);
    tmp.resize(span.size() * per);
    for (size_t k = 0; k < layers; ++k) {
      hash::ComputeBuckets(l.spec, table_layer_[k], span, tmp.data());
      for (int r = 0; r < real; ++r) {
        size_t t = T - real + r;
        std::memcpy(&buckets_[k][(b * T + t) * per], &tmp[(ctx + r) * per], per * 8);
      }
    }
    for (int r = 0; r < real; ++r) {
      size_t t = T - real + r, pos_in_seq = s.size() - real + r;
      for (uint32_t n = hash::kMinOrder; n <= l.spec.max_order; ++n) {
        size_t cell = (b * T + t) * (l.spec.max_order - 1) + (n - hash::kMinOrder);
        full_[cell] = pos_in_seq + 1 >= n;
        const uint32_t* g = hash::NgramAt(l.spec, s, pos_in_seq, n, scratch);
        tags_[cell] = hash::OwnerTag(g, n, l.owner_tag_seed);
      }
    }
  }
  valid_ = valid;
  bufs_.assign(layers, std::vector<float>(B * T * mc_.memory_dim(), 0.0f));
  ready_.assign(layers, 0);
  worker_ = std::thread([this] { Run(); });
}

const float* RowGatherer::Rows(size_t k) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ready_[k] != 0; });
  if (error_) std::rethrow_exception(error_);
  return bufs_[k].data();
}

void RowGatherer::Finish(std::vector<uint64_t>* seq_lookups, std::vector<uint64_t>* seq_hits) {
  if (worker_.joinable()) worker_.join();
  if (error_) std::rethrow_exception(error_);
  for (size_t b = 0; b < B_; ++b) {
    (*seq_lookups)[b] += seq_l_[b];
    (*seq_hits)[b] += seq_h_[b];
  }
}

void RowGatherer::Run() {
  try {
    const format::Layout& l = view_.layout();
    const size_t per = l.spec.per_layer(), D = l.row_dim, heads = l.spec.n_heads;
    std::vector<uint64_t> rows(per);
    seq_l_.assign(B_, 0);
    seq_h_.assign(B_, 0);
    for (size_t k = 0; k < table_layer_.size(); ++k) {
      std::vector<float>& out = bufs_[k];
      for (size_t b = 0; b < B_; ++b)
        for (int t = 0; t < T_; ++t) {
          if (!valid_[b * T_ + t]) continue;
          for (size_t c = 0; c < per; ++c) {
            uint32_t n = static_cast<uint32_t>(c / heads) + hash::kMinOrder;
            rows[c] = l.RowOf(l.spec.SubIndex(table_layer_[k], n, static_cast<uint32_t>(c % heads)),
                              buckets_[k][(b * T_ + t) * per + c]);
          }
          table::GatherRowsF32(view_, rows, &out[(b * T_ + t) * per * D]);
          for (size_t c = 0; c < per; ++c) {
            uint32_t n = static_cast<uint32_t>(c / heads) + hash::kMinOrder;
            uint64_t row = rows[c];
            size_t cell = (b * T_ + t) * (l.spec.max_order - 1) + (n - hash::kMinOrder);
            if (full_[cell]) {
              bool hit = view_.Tag(row) == tags_[cell];
              ++seq_l_[b];
              seq_h_[b] += hit;
            }
          }
        }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_[k] = 1;
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    for (auto& r : ready_) r = 1;
    cv_.notify_all();
  }
}

}  // namespace engram::model

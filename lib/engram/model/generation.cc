// BatchStep: one padded, positioned forward step with its Engram rows gathered alongside.
#include "engram/model/generation.h"

#include <algorithm>
#include <memory>

#include "engram/model/gather.h"

namespace engram::model {

BatchStep::BatchStep(Transformer& model, const ModelConfig& mc, const format::TableView* view,
                     const std::vector<size_t>& table_layer, size_t batch)
    : model_(model),
      mc_(mc),
      view_(view),
      table_layer_(table_layer),
      batch_(batch),
      pos_next_(batch, 0),
      lookups_(batch, 0),
      hits_(batch, 0) {}

void BatchStep::Rewind() { std::fill(pos_next_.begin(), pos_next_.end(), 0); }

size_t BatchStep::Step(const std::vector<std::vector<uint32_t>>& fresh,
                       const std::vector<std::vector<uint32_t>>& canon, bool all_logits,
                       const std::vector<int64_t>* targets, std::vector<float>* logits) {
  const size_t B = batch_;
  size_t t_len = 0;
  for (const auto& f : fresh) t_len = std::max(t_len, f.size());
  std::vector<int64_t> tok(B * t_len, 0), pos(B * t_len, 0);
  std::vector<uint8_t> valid(B * t_len, 0);
  for (size_t b = 0; b < B; ++b) {
    const size_t pad = t_len - fresh[b].size();
    for (size_t t = 0; t < fresh[b].size(); ++t) {
      tok[b * t_len + pad + t] = fresh[b][t];
      pos[b * t_len + pad + t] = pos_next_[b] + static_cast<int64_t>(t);
      valid[b * t_len + pad + t] = 1;
    }
    pos_next_[b] += static_cast<int64_t>(fresh[b].size());
  }
  StepInput in;
  in.batch = static_cast<int>(B);
  in.T = static_cast<int>(t_len);
  in.tokens = tok.data();
  in.positions = pos.data();
  in.valid = valid.data();
  in.all_logits = all_logits;
  if (targets) in.targets = targets->data();
  std::unique_ptr<RowGatherer> g;
  if (view_) {
    g = std::make_unique<RowGatherer>(*view_, mc_, table_layer_);
    g->Start(canon, static_cast<int>(t_len), valid);
    staging_bytes_ = std::max<uint64_t>(
        staging_bytes_, B * t_len * mc_.memory_dim() * sizeof(float) * table_layer_.size());
    in.engram_rows = [&g](size_t k) { return g->Rows(k); };
  }
  model_.Forward(in, logits);
  std::fill(lookups_.begin(), lookups_.end(), 0);
  std::fill(hits_.begin(), hits_.end(), 0);
  if (g) g->Finish(&lookups_, &hits_);
  return t_len;
}

}  // namespace engram::model

// The one forward step that `run` (prompt, generation, perplexity) and serve's session take over
// a batch of sequences: token ids left-padded to the step's length, RoPE positions continuing
// each sequence, and Engram rows gathered from the table ahead of the layers that read them.
// Internal to libengram_model.so; torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "engram/format/view.h"
#include "engram/model/model_config.h"
#include "engram/model/transformer.h"

namespace engram::model {

class BatchStep {
 public:
  // `view` is null when the Engram branch is off. model, mc, view and table_layer must outlive
  // the BatchStep. table_layer: Engram layer k -> its index in the table's layer_ids.
  BatchStep(Transformer& model, const ModelConfig& mc, const format::TableView* view,
            const std::vector<size_t>& table_layer, size_t batch);

  // Feeds fresh[b], the new token ids of sequence b (sequences left-padded to the longest), at
  // the positions after those fed before; canon[b] holds sequence b's canonical ids up to and
  // including them. *logits receives the Transformer::Forward output: [B, vocab] at the last
  // position, [B, T, vocab] with all_logits, or each position's NLL with targets ([B, T] next
  // token ids, -1 = none). Returns the step's length T.
  size_t Step(const std::vector<std::vector<uint32_t>>& fresh,
              const std::vector<std::vector<uint32_t>>& canon, bool all_logits,
              const std::vector<int64_t>* targets, std::vector<float>* logits);
  // The next Step starts every sequence at position 0 again (after Transformer::Reset).
  void Rewind();

  // The last step's Engram lookups and hits per sequence (positions with a full n-gram).
  const std::vector<uint64_t>& lookups() const noexcept { return lookups_; }
  const std::vector<uint64_t>& hits() const noexcept { return hits_; }
  // The most bytes of Engram rows one step staged so far.
  uint64_t staging_bytes() const noexcept { return staging_bytes_; }

 private:
  Transformer& model_;
  const ModelConfig& mc_;
  const format::TableView* view_;
  const std::vector<size_t>& table_layer_;
  size_t batch_;
  std::vector<int64_t> pos_next_;
  std::vector<uint64_t> lookups_, hits_;
  uint64_t staging_bytes_ = 0;
};

}  // namespace engram::model

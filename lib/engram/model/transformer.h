// The MoE+Engram decoder (scripts/model/engram_model.py is its PyTorch reference), behind a
// torch-free interface: only transformer.cc includes <torch/...>.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engram/model/model_config.h"

namespace engram::model {

struct TransformerOptions {
  std::string dtype = "float32";  // float32 | bfloat16 (weights and activations)
  std::string kv_cache_dtype =
      "auto";  // auto | f32 | bf16 | fp8 (e4m3 + per-vector scale, emulated)
  int threads = 0;
  int max_batch = 1;
  int max_seq = 2048;
};

// One forward step over B sequences (left-padded to the same length T).
struct StepInput {
  int batch = 1, T = 0;
  const int64_t* tokens = nullptr;     // [B, T]
  const int64_t* positions = nullptr;  // [B, T] RoPE positions
  const uint8_t* valid = nullptr;      // [B, T] 0 = padding
  // Engram rows of Engram layer k for this step: [B, T, memory_dim] floats. Called when layer k is
  // reached (so gathers can run ahead while earlier layers compute); null = Engram off.
  std::function<const float*(size_t)> engram_rows;
  bool all_logits = false;  // logits for every position (else the last one only)
  // Perplexity: when set ([B, T] next-token ids, -1 = none), Forward returns the negative
  // log-likelihood of each target instead of logits ([B, T] floats; 0 where the target is -1).
  const int64_t* targets = nullptr;
};

// `append --fit`: sequences whose Engram rows are partly trainable. Sequences are right-padded to
// T (causal attention and the causal conv leave real positions untouched by padding).
struct RowFitBatch {
  int batch = 0, T = 0;
  std::vector<int64_t> tokens;   // [B, T]
  std::vector<int64_t> targets;  // [B, T]: the token position t must predict, -1 = none
  // Per Engram layer k: the frozen rows every position reads, [B, T, per_layer, row_dim] floats,
  // and for each (b, t, c) the index of the trainable row it reads instead (-1 = frozen).
  std::vector<std::vector<float>> frozen;
  std::vector<std::vector<int64_t>> train_index;
  int64_t row_dim = 0;
  // Per entry sequence (the first batch - preserve): the margin it must reach; 0 or absent = the
  // round's RowFitParams::margin (ledger facts keep the margin they were fitted to).
  std::vector<float> margins;
  // The last `preserve` sequences are not entries but contexts from a corpus that read some of
  // the trainable rows: their targets mark (any value >= 0) the positions whose next-token
  // distribution the fit keeps close to the unedited model's (KL, weight RowFitParams::keep).
  int preserve = 0;
};

struct RowFitParams {
  int steps = 300;
  double lr = 0.05;        // Adam
  double l2 = 1e-3;        // penalty weight on the squared change of the trainable rows
  double margin = 1.0;     // a sequence is fitted when every target's logit leads by this much
  double keep = 0;         // weight of the preservation KL (per preserved position, mean)
  int keep_batch = 32;     // preservation contexts per step, taken in turn
  bool bf16_head = false;  // the output head's products in bf16 (f32 sums) inside the loop
  bool shrink = false;     // after the fit, pull each target position's own rows back (Shrink)
  int shrink_steps = 6;    // bisection steps per position
  // Called after each step: (step, sequences fitted, loss). Returning false stops the fit.
  std::function<bool(int, int, double)> progress;
};

struct RowFitOutcome {
  int steps = 0;                // optimiser steps taken
  std::vector<uint8_t> fitted;  // per sequence, at the last forward
  double loss = 0;
  double keep_kl = 0;  // mean KL(unedited || fitted) over the preservation contexts, at the end
  double shrink = 1;   // mean factor left on the rows' change by Shrink (1 = none)
};

// Whether this build's libtorch can reach a CUDA device.
bool TorchHasCuda();

class Transformer {
 public:
  // Loads weights from <dir>/model.safetensors (or an index). Throws kInvalidArgument /
  // kCorrupt naming missing or mis-shaped tensors.
  static std::unique_ptr<Transformer> Load(const ModelConfig& cfg, const TransformerOptions& opts);
  virtual ~Transformer() = default;

  // Clears the KV cache and conv states.
  virtual void Reset() = 0;
  // Runs one step and appends to the cache. logits receives [B, Tout, vocab] floats.
  virtual void Forward(const StepInput& in, std::vector<float>* logits) = 0;
  // Minimises the targets' cross-entropy (teacher forcing, frozen weights) over the trainable
  // rows `rows` ([R, row_dim], updated in place), with an L2 penalty toward `anchor`; stops once
  // every sequence is fitted (margin) or after params.steps. Uses no KV cache (Reset not needed).
  virtual RowFitOutcome FitRows(const RowFitBatch& batch, const RowFitParams& params,
                                const std::vector<float>& anchor, std::vector<float>* rows) = 0;
  // False when the output head's row for `token` is all zero: its logit is stuck at 0, so the
  // model can never prefer it (tokens absent from the training text keep such rows).
  virtual bool CanEmit(uint32_t token) const = 0;
  virtual uint64_t weight_bytes() const = 0;
  virtual uint64_t cache_bytes() const = 0;
};

}  // namespace engram::model

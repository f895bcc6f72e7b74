// Choosing the next token from a step's logits: llama.cpp's repetition penalty, then greedy or
// temperature / top-k / top-p sampling. Shared by run and serve. Also how two steps' logits
// differ (run's table comparison, fit's near misses). Internal to libengram_model.so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "engram/model/session.h"  // kMinTemperature

namespace engram::model {

struct SamplingParams {
  double temperature = 0.8;  // below kMinTemperature: greedy (the first highest logit)
  int top_k = 40;            // 0 = off
  double top_p = 0.95;       // 1 = off
};

// Samples a token id from logits[0..V) (same rng state -> same token).
uint32_t Sample(const float* logits, size_t V, const SamplingParams& p, std::mt19937_64* rng);

// llama.cpp's repetition penalty: every distinct token among the last `last_n` of `ids` (-1 = all)
// has its logit divided by `penalty` if positive, multiplied if negative.
void ApplyRepeatPenalty(const std::vector<uint32_t>& ids, double penalty, int last_n,
                        std::vector<float>* logits);

// Two next-token distributions over the same V tokens, given as logits, in double:
// KL(softmax(a) || softmax(b)), each one's log normaliser (log-sum-exp) and argmax (the first
// highest logit).
struct LogitsCompare {
  double kl = 0, lse_a = 0, lse_b = 0;
  uint32_t top_a = 0, top_b = 0;
};
LogitsCompare CompareLogits(const float* a, const float* b, uint32_t V);

}  // namespace engram::model

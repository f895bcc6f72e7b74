// The Engram gate in f32 without libtorch: the CPU counterpart of kernels::EngramGate and the code
// `run` uses for f32 models on CPU.
#pragma once

#include <cstddef>

namespace engram::model {

// For each of n tokens of width d:
//   g = <RMSNorm(k) * wk, RMSNorm(h) * wq> / sqrt(d),  RMSNorm(x) = x / sqrt(mean(x^2) + eps)
//   g = sign(g) * sqrt(max(|g|, 1e-6))    (0 stays 0)
//   out = sigmoid(g) * v
// All arrays are row-major [n, d] (wk, wq: [d]); out may alias v.
void EngramGateCpu(const float* k, const float* h, const float* wk, const float* wq, const float* v,
                   float* out, size_t n, size_t d, float eps) noexcept;

}  // namespace engram::model

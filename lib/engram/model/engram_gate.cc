// The Engram gate in f32 (see engram_gate.h).
#include "engram/model/engram_gate.h"

#include <algorithm>
#include <cmath>

namespace engram::model {

void EngramGateCpu(const float* k, const float* h, const float* wk, const float* wq, const float* v,
                   float* out, size_t n, size_t d, float eps) noexcept {
  for (size_t t = 0; t < n; ++t) {
    const float* kt = k + t * d;
    const float* ht = h + t * d;
    double sk = 0, sh = 0, dot = 0;
    for (size_t i = 0; i < d; ++i) {
      sk += static_cast<double>(kt[i]) * kt[i];
      sh += static_cast<double>(ht[i]) * ht[i];
      dot += static_cast<double>(kt[i] * wk[i]) * (ht[i] * wq[i]);
    }
    const double rk = 1.0 / std::sqrt(static_cast<float>(sk / d) + eps);
    const double rh = 1.0 / std::sqrt(static_cast<float>(sh / d) + eps);
    double g = dot * rk * rh / std::sqrt(static_cast<double>(d));
    if (g != 0) g = std::copysign(std::sqrt(std::max(std::fabs(g), 1e-6)), g);
    const float alpha = static_cast<float>(1.0 / (1.0 + std::exp(-g)));
    for (size_t i = 0; i < d; ++i) out[t * d + i] = alpha * v[t * d + i];
  }
}

}  // namespace engram::model

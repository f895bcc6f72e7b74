// model::EngramGateCpu: the torch-free f32 gate `run` uses on CPU and the CUDA kernel's reference.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engram/model/engram_gate.h"

using engram::model::EngramGateCpu;

namespace {

// The formula written out step by step in double, as scripts/model/engram_model.py states it.
std::vector<double> Reference(const std::vector<float>& k, const std::vector<float>& h,
                              const std::vector<float>& wk, const std::vector<float>& wq,
                              const std::vector<float>& v, size_t n, size_t d, double eps) {
  std::vector<double> out(n * d);
  for (size_t t = 0; t < n; ++t) {
    double mk = 0, mh = 0;
    for (size_t i = 0; i < d; ++i) {
      mk += double(k[t * d + i]) * k[t * d + i] / d;
      mh += double(h[t * d + i]) * h[t * d + i] / d;
    }
    double g = 0;
    for (size_t i = 0; i < d; ++i)
      g += (k[t * d + i] / std::sqrt(mk + eps) * wk[i]) *
           (h[t * d + i] / std::sqrt(mh + eps) * wq[i]);
    g /= std::sqrt(double(d));
    double s = g > 0 ? 1 : g < 0 ? -1 : 0;
    g = s * std::sqrt(std::max(std::fabs(g), 1e-6));
    for (size_t i = 0; i < d; ++i) out[t * d + i] = v[t * d + i] / (1 + std::exp(-g));
  }
  return out;
}

}  // namespace

TEST_CASE("EngramGateCpu follows the gate formula, including a zero and a tiny gate") {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = 50, d = 96;
  std::vector<float> k(n * d), h(n * d), v(n * d), wk(d), wq(d), out(n * d);
  for (auto* a : {&k, &h, &v, &wk, &wq})
    for (auto& x : *a) x = nd(rng);
  std::fill(k.begin(), k.begin() + d, 0.0f);  // token 0: gate 0 -> sigmoid(0) = 0.5
  for (size_t i = 0; i < d; ++i) k[d + i] = 1e-3f * (i % 2 ? 1.0f : -1.0f);  // token 1: |g| tiny
  EngramGateCpu(k.data(), h.data(), wk.data(), wq.data(), v.data(), out.data(), n, d, 1e-6f);
  auto want = Reference(k, h, wk, wq, v, n, d, 1e-6);
  for (size_t i = 0; i < d; ++i) REQUIRE(out[i] == doctest::Approx(0.5 * v[i]).epsilon(1e-6));
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    num += (out[i] - want[i]) * (out[i] - want[i]);
    den += want[i] * want[i];
  }
  CHECK(num / den < 1e-12);
  // A gate that is positive for one token is negative for -h: alpha(g) + alpha(-g) = 1.
  std::vector<float> hn(h), out2(n * d);
  for (auto& x : hn) x = -x;
  EngramGateCpu(k.data(), hn.data(), wk.data(), wq.data(), v.data(), out2.data(), n, d, 1e-6f);
  for (size_t i = 2 * d; i < n * d; i += 7)
    if (std::fabs(v[i]) > 1e-3f)
      REQUIRE((out[i] + out2[i]) / v[i] == doctest::Approx(1.0).epsilon(1e-5));
  // out may alias v.
  std::vector<float> inplace(v);
  EngramGateCpu(k.data(), h.data(), wk.data(), wq.data(), inplace.data(), inplace.data(), n, d,
                1e-6f);
  CHECK(inplace == out);
}

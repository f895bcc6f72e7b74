// Sampling: penalties, greedy, temperature, top-k and top-p.
#include "engram/model/sampling.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace engram::model {

void ApplyRepeatPenalty(const std::vector<uint32_t>& ids, double penalty, int last_n,
                        std::vector<float>* logits) {
  size_t n = last_n < 0 ? ids.size() : std::min(ids.size(), static_cast<size_t>(last_n));
  std::vector<uint32_t> recent(ids.end() - static_cast<std::ptrdiff_t>(n), ids.end());
  std::sort(recent.begin(), recent.end());
  recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
  const auto p = static_cast<float>(penalty);
  for (uint32_t t : recent) {
    if (t >= logits->size()) continue;
    float& l = (*logits)[t];
    l = l > 0 ? l / p : l * p;
  }
}

uint32_t Sample(const float* logits, size_t V, const SamplingParams& o, std::mt19937_64* rng) {
  if (!(o.temperature >= kMinTemperature))  // NaN too
    return static_cast<uint32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<std::pair<float, uint32_t>> c(V);
  for (size_t i = 0; i < V; ++i)
    c[i] = {logits[i] / static_cast<float>(o.temperature), static_cast<uint32_t>(i)};
  size_t k = (o.top_k > 0 && static_cast<size_t>(o.top_k) < V) ? static_cast<size_t>(o.top_k) : V;
  std::partial_sort(c.begin(), c.begin() + k, c.end(),
                    [](auto& a, auto& b) { return a.first > b.first; });
  c.resize(k);
  double mx = c[0].first, sum = 0;
  std::vector<double> p(k);
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp(c[i].first - mx);
  size_t keep = k;
  if (o.top_p < 1.0) {
    double acc = 0;
    for (size_t i = 0; i < k; ++i) {
      acc += p[i] / sum;
      if (acc >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  double u = std::uniform_real_distribution<double>(0, total)(*rng);
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return c[i].second;
    u -= p[i];
  }
  return c[keep - 1].second;
}

LogitsCompare CompareLogits(const float* a, const float* b, uint32_t V) {
  LogitsCompare c;
  double ma = a[0], mb = b[0];
  for (uint32_t v = 1; v < V; ++v) {
    if (a[v] > ma) ma = a[v], c.top_a = v;
    if (b[v] > mb) mb = b[v], c.top_b = v;
  }
  double za = 0, zb = 0;
  for (uint32_t v = 0; v < V; ++v) {
    za += std::exp(a[v] - ma);
    zb += std::exp(b[v] - mb);
  }
  c.lse_a = ma + std::log(za);
  c.lse_b = mb + std::log(zb);
  double kl = 0;
  for (uint32_t v = 0; v < V; ++v) {
    const double la = a[v] - c.lse_a, lb = b[v] - c.lse_b;
    kl += std::exp(la) * (la - lb);
  }
  c.kl = std::max(0.0, kl);
  return c;
}

}  // namespace engram::model

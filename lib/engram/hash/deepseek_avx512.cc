// DeepSeek-compatible bucket computation with AVX-512 (this file alone is built with
// -mavx512f -mavx512dq; addressing.cc calls it only on CPUs that have both). Eight heads' buckets
// of one (position, order) are computed at once: the quotient mix / p is estimated in double
// precision and the remainder corrected exactly in 64-bit integers, so results equal `mix mod p`
// bit for bit (tests compare against the scalar path and the numpy reference).
#include <algorithm>

#include "engram/hash/addressing.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace engram::hash::detail {

bool DeepSeekAvx512Usable(const AddressSpec& s) noexcept {
  if (s.n_heads % 8 != 0) return false;
  // The double estimate is within one of the quotient only for divisors >= 2^16.
  for (uint64_t p : s.sizes)
    if (p < (uint64_t{1} << 16) || p >= (uint64_t{1} << 52)) return false;
  return true;
}

void ComputeBucketsDeepSeekAvx512(const AddressSpec& s, size_t layer_index,
                                  std::span<const uint32_t> ids, uint64_t* out) noexcept {
  const uint32_t N = s.max_order, heads = s.n_heads;
  const size_t per_layer = s.per_layer();
  const size_t groups = heads / 8;
  const int64_t* mult = s.multipliers.data() + layer_index * N;
  const uint64_t* sizes = s.sizes.data() + layer_index * per_layer;
  // Per (order, head group): p as int64 and 1/p as double.
  __m512i vp[kMaxOrder * kMaxHeads / 8];
  __m512d vinv[kMaxOrder * kMaxHeads / 8];
  for (uint32_t n = kMinOrder; n <= N; ++n)
    for (size_t g = 0; g < groups; ++g) {
      alignas(64) int64_t p[8];
      alignas(64) double inv[8];
      for (int k = 0; k < 8; ++k) {
        p[k] = static_cast<int64_t>(sizes[(n - kMinOrder) * heads + g * 8 + k]);
        inv[k] = 1.0 / static_cast<double>(p[k]);
      }
      vp[(n - kMinOrder) * groups + g] = _mm512_load_si512(p);
      vinv[(n - kMinOrder) * groups + g] = _mm512_load_pd(inv);
    }
  const __m512i zero = _mm512_setzero_si512();
  uint64_t m[kMaxOrder];
  for (uint32_t k = 0; k < N; ++k) m[k] = static_cast<uint64_t>(mult[k]);
  uint32_t scratch[kMaxOrder];
  auto one_position = [&](const uint32_t* g, uint64_t* o) {  // g: the N-id window, oldest first
    uint64_t mix = static_cast<uint64_t>(g[N - 1]) * m[0];
    for (uint32_t n = kMinOrder; n <= N; ++n) {
      mix ^= static_cast<uint64_t>(g[N - n]) * m[n - 1];
      uint64_t* on = o + (n - kMinOrder) * heads;
      const int64_t sm = static_cast<int64_t>(mix);
      if (sm < 0) [[unlikely]] {  // only ids beyond the vocabulary can wrap; keep floor semantics
        for (uint32_t h = 0; h < heads; ++h) {
          int64_t p = static_cast<int64_t>(sizes[(n - kMinOrder) * heads + h]);
          int64_t r = sm % p;
          on[h] = static_cast<uint64_t>(r < 0 ? r + p : r);
        }
        continue;
      }
      const __m512d vd = _mm512_set1_pd(static_cast<double>(sm));
      const __m512i vm = _mm512_set1_epi64(sm);
      for (size_t gi = 0; gi < groups; ++gi) {
        const __m512i p = vp[(n - kMinOrder) * groups + gi];
        __m512d qd = _mm512_roundscale_pd(_mm512_mul_pd(vd, vinv[(n - kMinOrder) * groups + gi]),
                                          _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512i r = _mm512_sub_epi64(vm, _mm512_mullo_epi64(_mm512_cvttpd_epi64(qd), p));
        r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, zero), r, p);
        r = _mm512_mask_sub_epi64(r, _mm512_cmpge_epi64_mask(r, p), r, p);
        _mm512_storeu_si512(on + gi * 8, r);
      }
    }
  };
  const size_t T = ids.size();
  const size_t head_positions = std::min<size_t>(T, N - 1);
  for (size_t t = 0; t < head_positions; ++t)
    one_position(NgramAt(s, ids, t, N, scratch), out + t * per_layer);
  for (size_t t = head_positions; t < T; ++t)
    one_position(ids.data() + t + 1 - N, out + t * per_layer);
}

}  // namespace engram::hash::detail
#endif  // __x86_64__

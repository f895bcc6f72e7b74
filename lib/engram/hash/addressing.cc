// Both addressing modes (schemas/table_format.md §4) and the derivation of their parameters.
#include "engram/hash/addressing.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>

#include "engram/base/checked.h"
#include "engram/base/error.h"
#include "engram/hash/ngram_hash.h"
#include "engram/hash/numpy_random.h"

namespace engram::hash {

std::string_view AddressingName(AddressingMode m) noexcept {
  switch (m) {
    case AddressingMode::kNative:
      return "native";
    case AddressingMode::kDeepSeek:
      return "deepseek";
  }
  return "?";
}

namespace {

uint64_t MulMod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t PowMod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  a %= m;
  while (e) {
    if (e & 1) r = MulMod(r, a, m);
    a = MulMod(a, a, m);
    e >>= 1;
  }
  return r;
}

}  // namespace

bool IsPrime(uint64_t n) noexcept {
  if (n < 2) return false;
  for (uint64_t p :
       {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  // These bases are a deterministic witness set for all n < 2^64.
  for (uint64_t a :
       {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    uint64_t x = PowMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s; ++r) {
      x = MulMod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

int64_t DeepSeekHalfBound(uint32_t canonical_vocab) noexcept {
  int64_t m_max = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(canonical_vocab);
  return std::max<int64_t>(1, m_max / 2);
}

std::vector<int64_t> DeepSeekMultipliers(uint64_t seed, uint32_t layer_id, uint32_t max_order,
                                         uint32_t canonical_vocab) {
  uint64_t base_seed = seed + 10007ull * layer_id;
  std::vector<int64_t> r = NumpyIntegers(base_seed, DeepSeekHalfBound(canonical_vocab), max_order);
  for (auto& v : r) v = v * 2 + 1;
  return r;
}

void Derive(AddressSpec* s) {
  ENGRAM_CHECK(!s->layer_ids.empty(), Code::kInvalidArgument,
               "engram layer ids: none given; name at least one layer (e.g. layer_ids = [1, 15])");
  ENGRAM_CHECK(s->layer_ids.size() <= kMaxLayers, Code::kInvalidArgument,
               "engram layer ids: " << s->layer_ids.size() << " layers, at most " << kMaxLayers);
  {
    std::set<uint32_t> uniq(s->layer_ids.begin(), s->layer_ids.end());
    ENGRAM_CHECK(uniq.size() == s->layer_ids.size(), Code::kInvalidArgument,
                 "engram layer ids: a layer id appears twice; list each layer once");
  }
  ENGRAM_CHECK(
      s->max_order >= kMinOrder && s->max_order <= kMaxOrder, Code::kInvalidArgument,
      "ngram order = " << s->max_order << ": must be in " << kMinOrder << ".." << kMaxOrder);
  ENGRAM_CHECK(s->n_heads >= 1 && s->n_heads <= kMaxHeads, Code::kInvalidArgument,
               "heads per order = " << s->n_heads << ": must be in 1.." << kMaxHeads);
  ENGRAM_CHECK(s->canonical_vocab >= 1, Code::kInvalidArgument,
               "canonical vocabulary size is 0; give a tokenizer or a vocabulary size");
  ENGRAM_CHECK(s->pad_id < s->canonical_vocab, Code::kInvalidArgument,
               "pad id " << s->pad_id << " is outside the canonical vocabulary of "
                         << s->canonical_vocab << " ids; choose a pad id below it");
  s->multipliers.clear();
  s->sizes.clear();
  s->seeds.clear();
  const size_t per_layer = s->per_layer();
  if (s->mode == AddressingMode::kNative) {
    ENGRAM_CHECK(s->log2_buckets >= 1 && s->log2_buckets <= kMaxLog2Buckets, Code::kInvalidArgument,
                 "native addressing: log2 buckets = " << s->log2_buckets << ", must be in 1.."
                                                      << kMaxLog2Buckets);
    s->base_sizes.clear();
    s->sizes.assign(s->n_subtables(), uint64_t{1} << s->log2_buckets);
    s->seeds.resize(s->n_subtables());
    for (size_t l = 0; l < s->n_layers(); ++l)
      for (uint32_t n = kMinOrder; n <= s->max_order; ++n)
        for (uint32_t h = 0; h < s->n_heads; ++h)
          s->seeds[s->SubIndex(l, n, h)] = SubtableSeed(s->seed, s->layer_ids[l], n, h);
    return;
  }
  ENGRAM_CHECK(s->mode == AddressingMode::kDeepSeek, Code::kInvalidArgument,
               "unknown addressing mode");
  if (s->base_sizes.size() == 1) s->base_sizes.assign(s->n_orders(), s->base_sizes[0]);
  ENGRAM_CHECK(s->base_sizes.size() == s->n_orders(), Code::kInvalidArgument,
               "deepseek addressing: " << s->base_sizes.size() << " base sizes for "
                                       << s->n_orders()
                                       << " orders; give one per order or one for all");
  for (uint64_t b : s->base_sizes)
    ENGRAM_CHECK(b >= 2 && b < (uint64_t{1} << 40), Code::kInvalidArgument,
                 "deepseek addressing: base size " << b << " must be in 2..2^40");
  std::set<uint64_t> seen;
  s->sizes.resize(s->n_subtables());
  for (size_t l = 0; l < s->n_layers(); ++l) {
    std::vector<int64_t> m =
        DeepSeekMultipliers(s->seed, s->layer_ids[l], s->max_order, s->canonical_vocab);
    s->multipliers.insert(s->multipliers.end(), m.begin(), m.end());
    for (uint32_t n = kMinOrder; n <= s->max_order; ++n) {
      uint64_t start = s->base_sizes[n - kMinOrder] - 1;
      for (uint32_t h = 0; h < s->n_heads; ++h) {
        uint64_t c = start + 1;
        while (!IsPrime(c) || seen.count(c)) ++c;
        seen.insert(c);
        s->sizes[l * per_layer + (n - kMinOrder) * s->n_heads + h] = c;
        start = c;
      }
    }
  }
}

void CheckDerived(const AddressSpec& spec) {
  AddressSpec copy = spec;
  Derive(&copy);
  ENGRAM_CHECK(copy.sizes == spec.sizes, Code::kCorrupt,
               "stored sub-table sizes do not match the addressing parameters");
  ENGRAM_CHECK(copy.multipliers == spec.multipliers, Code::kCorrupt,
               "stored hash multipliers do not match the addressing parameters");
  ENGRAM_CHECK(copy.seeds == spec.seeds, Code::kCorrupt,
               "stored sub-table seeds do not match the addressing parameters");
}

const uint32_t* NgramAt(const AddressSpec& spec, std::span<const uint32_t> ids, size_t t,
                        uint32_t n, uint32_t* scratch) noexcept {
  if (t + 1 >= n) return ids.data() + (t + 1 - n);
  // Left-pad: scratch[0 .. n-1-(t+1)) = pad, then ids[0..t].
  size_t missing = n - (t + 1);
  for (size_t k = 0; k < missing; ++k) scratch[k] = spec.pad_id;
  for (size_t k = 0; k <= t; ++k) scratch[missing + k] = ids[k];
  return scratch;
}

namespace detail {
#if defined(__x86_64__)
bool DeepSeekAvx512Usable(const AddressSpec& s) noexcept;
void ComputeBucketsDeepSeekAvx512(const AddressSpec& s, size_t layer_index,
                                  std::span<const uint32_t> ids, uint64_t* out) noexcept;
#endif
}  // namespace detail

namespace {

bool CpuHasAvx512Dq() noexcept {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return has && std::getenv("ENGRAM_NO_AVX512") == nullptr;
#else
  return false;
#endif
}

inline uint64_t FloorMod(int64_t mix, uint64_t p) noexcept {
  int64_t r = mix % static_cast<int64_t>(p);
  if (r < 0) r += static_cast<int64_t>(p);
  return static_cast<uint64_t>(r);
}

inline int64_t DeepSeekMix(const int64_t* mult, const uint32_t* ngram, uint32_t n) noexcept {
  // The reference indexes history backwards: x_{t-k} * m_k; ngram is oldest first.
  uint64_t mix = 0;
  for (uint32_t k = 0; k < n; ++k)
    mix ^= static_cast<uint64_t>(ngram[n - 1 - k]) * static_cast<uint64_t>(mult[k]);
  return static_cast<int64_t>(mix);
}

}  // namespace

uint64_t BucketOf(const AddressSpec& spec, size_t layer_index, uint32_t order, uint32_t head,
                  const uint32_t* ngram) noexcept {
  size_t sub = spec.SubIndex(layer_index, order, head);
  if (spec.mode == AddressingMode::kNative)
    return NgramHash(ngram, order, spec.seeds[sub]) & (spec.sizes[sub] - 1);
  const int64_t* mult = spec.multipliers.data() + layer_index * spec.max_order;
  return FloorMod(DeepSeekMix(mult, ngram, order), spec.sizes[sub]);
}

void ComputeBuckets(const AddressSpec& spec, size_t layer_index, std::span<const uint32_t> ids,
                    uint64_t* out) noexcept {
  const size_t per_layer = spec.per_layer();
  const uint32_t heads = spec.n_heads;
  uint32_t scratch[kMaxOrder];
  const size_t base = layer_index * per_layer;
  if (spec.mode == AddressingMode::kNative) {
    const uint64_t mask = (uint64_t{1} << spec.log2_buckets) - 1;
    const uint64_t* seeds = spec.seeds.data() + base;
    for (size_t t = 0; t < ids.size(); ++t) {
      uint64_t* o = out + t * per_layer;
      for (uint32_t n = kMinOrder; n <= spec.max_order; ++n) {
        const uint32_t* g = NgramAt(spec, ids, t, n, scratch);
        const uint64_t* s = seeds + (n - kMinOrder) * heads;
        for (uint32_t h = 0; h < heads; ++h)
          o[(n - kMinOrder) * heads + h] = NgramHash(g, n, s[h]) & mask;
      }
    }
    return;
  }
#if defined(__x86_64__)
  if (CpuHasAvx512Dq() && detail::DeepSeekAvx512Usable(spec)) {
    detail::ComputeBucketsDeepSeekAvx512(spec, layer_index, ids, out);
    return;
  }
#endif
  const int64_t* mult = spec.multipliers.data() + layer_index * spec.max_order;
  const uint64_t* sizes = spec.sizes.data() + base;
  for (size_t t = 0; t < ids.size(); ++t) {
    uint64_t* o = out + t * per_layer;
    for (uint32_t n = kMinOrder; n <= spec.max_order; ++n) {
      const uint32_t* g = NgramAt(spec, ids, t, n, scratch);
      int64_t mix = DeepSeekMix(mult, g, n);
      const uint64_t* p = sizes + (n - kMinOrder) * heads;
      for (uint32_t h = 0; h < heads; ++h) o[(n - kMinOrder) * heads + h] = FloorMod(mix, p[h]);
    }
  }
}

}  // namespace engram::hash

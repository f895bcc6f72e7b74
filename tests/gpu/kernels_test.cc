// Parity of the CUDA kernels with their CPU counterparts (the code `run` uses on CPU): bucket ids
// and gathered rows must be identical, the f32 gate within NMSE 1e-6. Exits 77 (ctest: skipped)
// with a message when no CUDA device is usable.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "../unit/test_util.h"
#include "engram/base/reporter.h"
#include "engram/format/reader.h"
#include "engram/format/writer.h"
#include "engram/hash/addressing.h"
#include "engram/model/engram_gate.h"
#include "engram/table/gather.h"
#include "engram_kernels.h"

using namespace engram;
namespace k = engram::kernels;

namespace {

template <typename T>
struct Dev {
  explicit Dev(size_t n) : n(n), p(static_cast<T*>(k::DeviceAlloc(n * sizeof(T) + 1))) {}
  ~Dev() { k::DeviceFree(p); }
  void Put(const std::vector<T>& v) { k::CopyToDevice(p, v.data(), v.size() * sizeof(T)); }
  std::vector<T> Get() {
    std::vector<T> v(n);
    k::CopyToHost(v.data(), p, n * sizeof(T));
    return v;
  }
  size_t n;
  T* p;
};

hash::AddressSpec Spec(hash::AddressingMode mode, uint32_t order, uint32_t heads) {
  hash::AddressSpec s;
  s.mode = mode;
  s.seed = 12345;
  s.layer_ids = {1, 7, 20};
  s.max_order = order;
  s.n_heads = heads;
  s.pad_id = 3;
  s.canonical_vocab = 129280;
  s.log2_buckets = 22;
  s.base_sizes.assign(order - 1, 1000003);
  hash::Derive(&s);
  return s;
}

void WriteRandomTable(const std::string& path, const format::Layout& l, uint64_t seed) {
  format::WriterOptions o;
  o.with_stats = false;
  format::TableWriter w(path, l, o);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(l.row_dim);
  for (uint64_t r = 0; r < l.total_rows; ++r) {
    const float mag = std::ldexp(1.0f, static_cast<int>(r % 23) - 11);  // spread fp8 scales
    for (auto& x : v) x = nd(rng) * mag;
    base::EncodeRow(l.dtype, v, w.rows() + r * l.row_stride(),
                    l.scale_stride() ? w.scales() + r * l.scale_stride() : nullptr);
  }
  w.Commit(base::Silent());
}

}  // namespace

TEST_CASE("bucket ids on the GPU equal hash::ComputeBuckets in both addressing modes") {
  std::mt19937 rng(7);
  for (auto [mode, order, heads] : {std::tuple{hash::AddressingMode::kNative, 8u, 4u},
                                    std::tuple{hash::AddressingMode::kNative, 3u, 8u},
                                    std::tuple{hash::AddressingMode::kDeepSeek, 4u, 8u},
                                    std::tuple{hash::AddressingMode::kDeepSeek, 8u, 2u}}) {
    CAPTURE(static_cast<int>(mode));
    CAPTURE(order);
    hash::AddressSpec s = Spec(mode, order, heads);
    k::DeviceAddressing da(s);
    for (size_t T : {1ul, 5ul, 4097ul}) {
      std::vector<uint32_t> ids(T);
      for (auto& x : ids) x = rng() % s.canonical_vocab;
      Dev<uint32_t> d_ids(T);
      d_ids.Put(ids);
      for (size_t li = 0; li < s.n_layers(); ++li) {
        std::vector<uint64_t> want(T * s.per_layer());
        hash::ComputeBuckets(s, li, ids, want.data());
        Dev<uint64_t> d_out(want.size());
        da.ComputeBuckets(li, d_ids.p, T, d_out.p);
        k::Synchronize();
        REQUIRE(d_out.Get() == want);
      }
    }
  }
}

TEST_CASE("GPU gathers equal table::GatherRowsF32 for every dtype and placement") {
  testing::TempDir dir;
  struct Case {
    base::DType dtype;
    uint32_t row_dim;
  };
  for (Case c :
       {Case{base::DType::kF32, 64}, Case{base::DType::kBF16, 128}, Case{base::DType::kF16, 36},
        Case{base::DType::kF8E4M3, 256}, Case{base::DType::kF8E4M3, 32}, Case{base::DType::kI8, 40},
        Case{base::DType::kI4, 64}}) {
    CAPTURE(base::DTypeName(c.dtype));
    CAPTURE(c.row_dim);
    format::Layout l =
        testing::SmallLayout(c.dtype, hash::AddressingMode::kNative, 10, c.row_dim, {1, 3}, 3, 4);
    const std::string path = dir / "t.engram";
    WriteRandomTable(path, l, c.row_dim);
    auto reader = format::Reader::Open(path);
    std::mt19937_64 rng(1);
    std::vector<uint64_t> rows(5000);
    for (auto& r : rows) r = rng() % l.total_rows;
    rows[0] = 0;
    rows[1] = l.total_rows - 1;
    std::vector<float> want(rows.size() * l.row_dim);
    table::GatherRowsF32(*reader, rows, want.data());
    Dev<uint64_t> d_rows(rows.size());
    d_rows.Put(rows);
    for (auto where : {k::DeviceRows::Where::kHostRegistered, k::DeviceRows::Where::kHostPinned,
                       k::DeviceRows::Where::kDevice}) {
      CAPTURE(static_cast<int>(where));
      if (where == k::DeviceRows::Where::kHostRegistered && !k::HostRegisterReadOnlySupported()) {
        MESSAGE(
            "this GPU cannot map read-only host memory: zero-copy from the mapped table not "
            "tested");
        continue;
      }
      k::DeviceRows dr(*reader, where);
      Dev<float> d_f32(want.size());
      dr.Gather(d_rows.p, rows.size(), d_f32.p, false);
      k::Synchronize();
      std::vector<float> got = d_f32.Get();
      REQUIRE(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
      Dev<uint16_t> d_bf16(want.size());
      dr.Gather(d_rows.p, rows.size(), d_bf16.p, true);
      k::Synchronize();
      std::vector<uint16_t> gb = d_bf16.Get();
      for (size_t i = 0; i < want.size(); ++i) REQUIRE(gb[i] == base::FloatToBF16(want[i]));
    }
  }
}

TEST_CASE("the GPU Engram gate matches model::EngramGateCpu within NMSE 1e-6") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto [n, d] : {std::pair<size_t, size_t>{1000, 256}, {64, 7168}, {3, 1}}) {
    CAPTURE(n);
    CAPTURE(d);
    std::vector<float> kk(n * d), h(n * d), v(n * d), wk(d), wq(d), want(n * d);
    for (auto* a : {&kk, &h, &v, &wk, &wq})
      for (auto& x : *a) x = nd(rng);
    std::fill(kk.begin(), kk.begin() + d, 0.0f);  // gate exactly 0 for token 0
    model::EngramGateCpu(kk.data(), h.data(), wk.data(), wq.data(), v.data(), want.data(), n, d,
                         1e-6f);
    Dev<float> dk(n * d), dh(n * d), dv(n * d), dwk(d), dwq(d), dout(n * d);
    dk.Put(kk), dh.Put(h), dv.Put(v), dwk.Put(wk), dwq.Put(wq);
    k::EngramGate(dk.p, dh.p, dwk.p, dwq.p, dv.p, dout.p, n, d, 1e-6f);
    k::Synchronize();
    std::vector<float> got = dout.Get();
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      den += double(want[i]) * want[i];
    }
    const double nmse = num / den;
    MESSAGE("gate NMSE " << nmse);
    REQUIRE(nmse <= 1e-6);
  }
}

int main(int argc, char** argv) {
  std::string why;
  if (!k::DeviceAvailable(&why)) {
    std::printf("SKIP: the CUDA kernel parity tests need a GPU: %s\n", why.c_str());
    return 77;
  }
  std::printf("device: %s\n", k::DeviceName().c_str());
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

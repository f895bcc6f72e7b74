// Device benchmark for kernels/ (needs a CUDA GPU): bucket-id hashing throughput, and row-gather
// throughput at 1..16k tokens per step from (a) the mapped table registered with the GPU,
// (b) a pinned host copy, (c) device memory, each next to a plain cudaMemcpy of the same bytes
// from pinned host memory. The table is synthesised with the DeepSeek-V4.1 row geometry (fp8-e4m3
// rows of 256 values + e8m0 scales, orders 2..4 x 8 heads, 2 layers) unless --table names one.
//   bench_gpu [--dir /tmp] [--log2-buckets 18] [--table PATH] [--reps 20]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/format/layout.h"
#include "engram/format/reader.h"
#include "engram/format/writer.h"
#include "engram/hash/addressing.h"
#include "engram_kernels.h"

using namespace engram;
namespace k = engram::kernels;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double Time(int reps, F&& f) {
  f();  // warm-up
  k::Synchronize();
  double t0 = Now();
  for (int i = 0; i < reps; ++i) f();
  k::Synchronize();
  return (Now() - t0) / reps;
}

void Synthesise(const std::string& path, uint32_t log2) {
  hash::AddressSpec s;
  s.mode = hash::AddressingMode::kNative;
  s.seed = 1;
  s.layer_ids = {1, 14};
  s.max_order = 4;
  s.n_heads = 8;
  s.canonical_vocab = 129280;
  s.log2_buckets = log2;
  format::Layout l = format::MakeLayout(s, 256, base::DType::kF8E4M3);
  format::WriterOptions o;
  o.with_stats = false;
  format::TableWriter w(path, l, o);
  std::mt19937_64 rng(1);
  uint64_t* p = reinterpret_cast<uint64_t*>(w.rows());
  for (uint64_t i = 0; i < l.rows_bytes() / 8; ++i)
    p[i] = rng() & 0x7676767676767676ull;  // finite fp8
  std::memset(w.scales(), 120, l.total_rows * l.scale_stride());
  w.Commit(base::Silent());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp", table_path;
  uint32_t log2 = 18;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--dir")
      dir = v;
    else if (a == "--log2-buckets")
      log2 = std::stoul(v);
    else if (a == "--table")
      table_path = v;
    else if (a == "--reps")
      reps = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::string why;
  if (!k::DeviceAvailable(&why)) {
    std::fprintf(stderr, "bench_gpu: needs a CUDA GPU: %s\n", why.c_str());
    return 1;
  }
  bool synthesised = false;
  if (table_path.empty()) {
    table_path = dir + "/bench_gpu.engram";
    double t0 = Now();
    Synthesise(table_path, log2);
    synthesised = true;
    std::printf("synthesised %s (%.1f s)\n", table_path.c_str(), Now() - t0);
  }
  auto reader = format::Reader::Open(table_path);
  const format::Layout& l = reader->layout();
  const size_t per = l.spec.per_layer();
  const uint64_t row_bytes = l.row_stride() + l.scale_stride();
  std::printf(
      "device %s; table %.2f GiB, %llu rows of %u x %s (%llu bytes with scales), %zu rows per "
      "token per layer\n",
      k::DeviceName().c_str(), reader->file_length() / 1073741824.0,
      (unsigned long long)l.total_rows, l.row_dim, std::string(base::DTypeName(l.dtype)).c_str(),
      (unsigned long long)row_bytes, per);

  // Hashing: bucket ids of every layer for T tokens.
  {
    k::DeviceAddressing da(l.spec);
    const size_t T = 1 << 20;
    std::vector<uint32_t> ids(T);
    std::mt19937 rng(2);
    for (auto& x : ids) x = rng() % l.spec.canonical_vocab;
    auto* d_ids = static_cast<uint32_t*>(k::DeviceAlloc(T * 4));
    auto* d_out = static_cast<uint64_t*>(k::DeviceAlloc(T * per * 8));
    k::CopyToDevice(d_ids, ids.data(), T * 4);
    double s = Time(reps, [&] {
      for (size_t li = 0; li < l.spec.n_layers(); ++li) da.ComputeBuckets(li, d_ids, T, d_out);
    });
    std::printf("hash: %.1f M tokens/s (all %zu layers, %zu buckets per token per layer)\n",
                T / s / 1e6, l.spec.n_layers(), per);
    k::DeviceFree(d_ids);
    k::DeviceFree(d_out);
  }

  const size_t max_rows = 16384 * per;
  std::vector<uint64_t> rows(max_rows);
  std::mt19937_64 rng(3);
  for (auto& r : rows) r = rng() % l.total_rows;
  auto* d_rows = static_cast<uint64_t*>(k::DeviceAlloc(max_rows * 8));
  k::CopyToDevice(d_rows, rows.data(), max_rows * 8);
  void* d_out = k::DeviceAlloc(max_rows * l.row_dim * 2);
  void* pinned = k::PinnedAlloc(max_rows * row_bytes);
  std::memset(pinned, 1, max_rows * row_bytes);
  void* d_copy = k::DeviceAlloc(max_rows * row_bytes);

  struct Placement {
    const char* name;
    k::DeviceRows::Where where;
  };
  std::printf("%-16s %8s %10s %10s %10s %10s\n", "placement", "tokens", "Mrows/s", "GB/s", "memcpy",
              "ratio");
  double ratio16k_registered = -1, ratio16k_pinned = -1;
  for (Placement p : {Placement{"host-registered", k::DeviceRows::Where::kHostRegistered},
                      Placement{"host-pinned", k::DeviceRows::Where::kHostPinned},
                      Placement{"device", k::DeviceRows::Where::kDevice}}) {
    std::unique_ptr<k::DeviceRows> dr;
    try {
      dr = std::make_unique<k::DeviceRows>(*reader, p.where);
    } catch (const std::exception& e) {
      std::printf("%-16s skipped: %s\n", p.name, e.what());
      continue;
    }
    for (size_t T : {1ul, 16ul, 256ul, 1024ul, 4096ul, 16384ul}) {
      const size_t n = T * per;
      const double bytes = static_cast<double>(n) * row_bytes;
      double g = Time(reps, [&] { dr->Gather(d_rows, n, d_out, true); });
      double m = Time(reps, [&] { k::CopyToDevice(d_copy, pinned, n * row_bytes); });
      const double ratio = (bytes / g) / (bytes / m);
      std::printf("%-16s %8zu %10.2f %10.2f %10.2f %10.3f\n", p.name, T, n / g / 1e6,
                  bytes / g / 1e9, bytes / m / 1e9, ratio);
      if (T == 16384 && p.where == k::DeviceRows::Where::kHostRegistered)
        ratio16k_registered = ratio;
      if (T == 16384 && p.where == k::DeviceRows::Where::kHostPinned) ratio16k_pinned = ratio;
    }
  }
  if (ratio16k_registered >= 0)
    std::printf(
        "gather from the registered mapping / pinned cudaMemcpy at 16384 tokens: %.3f (target >= "
        "0.70)\n",
        ratio16k_registered);
  if (ratio16k_pinned >= 0)
    std::printf(
        "gather from pinned host memory / pinned cudaMemcpy at 16384 tokens: %.3f (target >= "
        "0.70)\n",
        ratio16k_pinned);
  k::PinnedFree(pinned);
  k::DeviceFree(d_copy);
  k::DeviceFree(d_out);
  k::DeviceFree(d_rows);
  reader.reset();
  if (synthesised) std::filesystem::remove(table_path);
  return 0;
}

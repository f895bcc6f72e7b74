// The memory-bound floor of build (issue 4): OPS random 8-byte read-modify-writes into an array
// of ARRAY_BYTES, with THREADS threads. Prints the seconds. (bench/bench_build.sh gives it the
// same operation count and array size as the build it compares.)
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: memory_floor ARRAY_BYTES OPS THREADS\n");
    return 2;
  }
  const uint64_t words = std::strtoull(argv[1], nullptr, 10) / 8;
  const uint64_t ops = std::strtoull(argv[2], nullptr, 10);
  const int threads = std::atoi(argv[3]);
  std::vector<uint64_t> a(words, 0);  // touched (zeroed) before timing
  auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    uint64_t x = 0x9E3779B97F4A7C15ull * (omp_get_thread_num() + 1);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(ops); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      a[x % words] += 1;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t sum = 0;
  for (uint64_t k = 0; k < words; k += 4096) sum += a[k];
  std::printf("%.6f %llu\n", s, static_cast<unsigned long long>(sum));
  return 0;
}

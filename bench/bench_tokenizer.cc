// Tokenizer encode throughput: encodes each line of a text file (one thread), prints seconds,
// bytes, tokens and an XXH3 of the id stream (to compare with the oracle's ids).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/hash/checksum.h"
#include "engram/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER.json TEXT [REPEAT]\n");
    return 2;
  }
  using namespace engram;
  auto tok = tokenizer::Tokenizer::Load(argv[1]);
  std::string text = base::ReadFileToString(argv[2], 1ull << 34);
  int repeat = argc > 3 ? std::atoi(argv[3]) : 1;
  std::vector<std::string> lines;
  for (size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    if (q > p) lines.push_back(text.substr(p, q - p));
  }
  double best = 1e30;
  uint64_t tokens = 0, digest = 0;
  for (int r = 0; r < repeat; ++r) {
    tokenizer::Encoder enc(*tok);  // a fresh word cache each round: no warm-cache advantage
    std::vector<uint32_t> all;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& l : lines) enc.EncodeAppend(l, &all);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tokens = all.size();
    digest = hash::Checksum64(all.data(), all.size() * 4);
  }
  std::printf("%.6f %zu %llu %016llx\n", best, text.size(), static_cast<unsigned long long>(tokens),
              static_cast<unsigned long long>(digest));
  return 0;
}

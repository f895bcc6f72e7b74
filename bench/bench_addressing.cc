// Addressing throughput: bucket ids of every (position, layer, order, head) of a token stream,
// computed in blocks (as build and run consume them), one thread. Prints seconds and a checksum
// of the bucket stream; --out writes the buckets of the first --out-tokens positions laid out
// [layer][position][order][head] as little-endian int64 (the layout of the numpy reference).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/hash/addressing.h"
#include "engram/hash/checksum.h"

int main(int argc, char** argv) {
  using namespace engram;
  std::string ids_path, mode = "deepseek", out_path, layers = "1,15";
  uint32_t order = 3, heads = 8, vocab = 98627, pad = 2, log2 = 20;
  uint64_t base = 646400, out_tokens = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--ids")
      ids_path = v;
    else if (k == "--mode")
      mode = v;
    else if (k == "--layers")
      layers = v;
    else if (k == "--max-order")
      order = std::stoul(v);
    else if (k == "--heads")
      heads = std::stoul(v);
    else if (k == "--vocab")
      vocab = std::stoul(v);
    else if (k == "--pad")
      pad = std::stoul(v);
    else if (k == "--base")
      base = std::stoull(v);
    else if (k == "--log2-buckets")
      log2 = std::stoul(v);
    else if (k == "--out")
      out_path = v;
    else if (k == "--out-tokens")
      out_tokens = std::stoull(v);
    else {
      std::fprintf(stderr, "bench_addressing: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  hash::AddressSpec s;
  s.mode = mode == "native" ? hash::AddressingMode::kNative : hash::AddressingMode::kDeepSeek;
  for (size_t p = 0, q; p < layers.size(); p = q + 1) {
    q = layers.find(',', p);
    if (q == std::string::npos) q = layers.size();
    s.layer_ids.push_back(std::stoul(layers.substr(p, q - p)));
  }
  s.max_order = order;
  s.n_heads = heads;
  s.canonical_vocab = vocab;
  s.pad_id = pad;
  s.base_sizes = {base};
  s.log2_buckets = log2;
  hash::Derive(&s);
  std::string raw = base::ReadFileToString(ids_path, 1ull << 34);
  std::vector<uint32_t> ids(raw.size() / 4);
  std::memcpy(ids.data(), raw.data(), ids.size() * 4);
  const size_t per = s.per_layer();
  // The numpy reference hashes the whole stream as one document: so do we, in blocks that stay in
  // L2 (each block is computed with its max_order-1 predecessors as history, whose rows are
  // dropped). The timed pass only touches one value per row; a second, untimed pass checksums
  // the whole bucket stream.
  const size_t block = 4096;
  std::vector<uint64_t> buf((block + s.max_order) * per);
  auto run = [&](hash::Checksum64Stream* sum) {
    uint64_t acc = 0;
    for (size_t l = 0; l < s.n_layers(); ++l)
      for (size_t b = 0; b < ids.size(); b += block) {
        size_t n = std::min(block, ids.size() - b);
        size_t ctx = std::min<size_t>(b, s.max_order - 1);
        hash::ComputeBuckets(s, l, std::span<const uint32_t>(ids.data() + b - ctx, n + ctx),
                             buf.data());
        if (sum)
          sum->Update(buf.data() + ctx * per, n * per * 8);
        else
          acc += buf[ctx * per + (b % per)] + buf[(ctx + n - 1) * per];
      }
    return acc;
  };
  auto t0 = std::chrono::steady_clock::now();
  uint64_t acc = run(nullptr);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  hash::Checksum64Stream sum;
  run(&sum);
  std::printf("%.6f %016llx %llu\n", secs, static_cast<unsigned long long>(sum.Digest()),
              static_cast<unsigned long long>(acc % 1000));
  if (!out_path.empty()) {
    size_t T = std::min<uint64_t>(out_tokens ? out_tokens : ids.size(), ids.size());
    std::vector<uint64_t> all(T * per);
    FILE* f = std::fopen(out_path.c_str(), "wb");
    for (size_t l = 0; l < s.n_layers(); ++l) {
      hash::ComputeBuckets(s, l, std::span<const uint32_t>(ids.data(), T), all.data());
      std::fwrite(all.data(), 8, all.size(), f);
    }
    std::fclose(f);
  }
  return 0;
}

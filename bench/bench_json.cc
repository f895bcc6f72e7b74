// The JSON reader behind tokenizer.json (issue 13): base::Json (ours) against nlohmann::json (the
// library serve uses) on the same file, and the whole Tokenizer::Load, best of N interleaved runs.
// Prints what the load would cost with nlohmann's parse in place of ours:
//   (load - ours + nlohmann) / load    (the rest of the load, walking the tree, is kept as ours).
// Usage: bench_json TOKENIZER_JSON [RUNS]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engram/base/json.h"
#include "engram/tokenizer/tokenizer.h"

namespace {
double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_json TOKENIZER_JSON [RUNS]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  double ours = 1e9, theirs = 1e9, load = 1e9;
  size_t sink = 0;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    engram::base::Json j = engram::base::Json::Parse(text, path, 64);
    ours = std::min(ours, Seconds(t0));
    sink += j.is_object();
    t0 = std::chrono::steady_clock::now();
    nlohmann::json n = nlohmann::json::parse(text);
    theirs = std::min(theirs, Seconds(t0));
    sink += n.size();
    t0 = std::chrono::steady_clock::now();
    auto tok = engram::tokenizer::Tokenizer::Load(path);
    load = std::min(load, Seconds(t0));
    sink += tok->vocab_size();
  }
  std::printf("%s: %.1f MiB, best of %d runs (sink %zu)\n", path.c_str(),
              static_cast<double>(text.size()) / (1 << 20), runs, sink);
  std::printf("parse, base::Json (ours):  %7.1f ms\n", ours * 1e3);
  std::printf("parse, nlohmann::json:     %7.1f ms  = %.2fx ours\n", theirs * 1e3, theirs / ours);
  std::printf("Tokenizer::Load (ours):    %7.1f ms\n", load * 1e3);
  std::printf("Tokenizer::Load with nlohmann's parse: %.1f ms = %.2fx (limit 1.5x)\n",
              (load - ours + theirs) * 1e3, (load - ours + theirs) / load);
  return 0;
}

// Flag groups several commands share, bound straight into the library's option structs: the
// layout flags (build, lookup, tokenize) and the model flags (run, serve).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/format/resolve.h"
#include "engram/model/run.h"

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace engramctl {

// Layout flags shared by commands that can describe a layout without a table.
struct LayoutFlags {
  std::string preset, addressing, layers, buckets, base_sizes, dtype, tokenizer;
  uint64_t hash_seed = 0;
  uint32_t order = 0, heads = 0, row_dim = 0, pad_id = 0, vocab = 0;
  CLI::Option *o_addr = nullptr, *o_seed = nullptr, *o_layers = nullptr, *o_order = nullptr,
              *o_heads = nullptr, *o_buckets = nullptr, *o_base = nullptr, *o_row_dim = nullptr,
              *o_dtype = nullptr, *o_pad = nullptr, *o_vocab = nullptr;
};
void AddLayoutFlags(CLI::App* app, LayoutFlags* f);
// Applies the flags that were given on top of what `r` already holds (config, preset).
void ApplyLayoutFlags(const LayoutFlags& f, engram::format::LayoutRequest* r);
// Comma-separated unsigned integers ("1,15").
std::vector<uint64_t> ParseUintList(const std::string& s, const char* flag);

// A number flag's range, checked with a message a user reads ("must be above 0"), non-finite
// values refused: lo < x (lo_inclusive: lo <= x) and x <= hi.
CLI::Validator NumberIn(double lo, double hi, bool lo_inclusive = true);

// The flags run and serve share, bound into RunOptions: --config, -m/--model, --table,
// -t/--threads, --device, --dtype, --kv-cache-dtype, --batch.
void AddModelFlags(CLI::App* app, engram::model::RunOptions* o);

}  // namespace engramctl

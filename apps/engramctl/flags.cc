// Layout and model flags.
#include "flags.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <sstream>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/units.h"

namespace engramctl {

std::vector<uint64_t> ParseUintList(const std::string& s, const char* flag) {
  std::vector<uint64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    unsigned long long x = 0;
    try {
      x = std::stoull(item, &used);
    } catch (...) {
      used = 0;
    }
    ENGRAM_CHECK(used == item.size() && !item.empty() && item[0] != '-',
                 engram::Code::kInvalidArgument,
                 flag << " '" << s << "': write comma-separated non-negative integers, e.g. 1,15");
    v.push_back(x);
  }
  ENGRAM_CHECK(!v.empty(), engram::Code::kInvalidArgument, flag << " is empty");
  return v;
}

void AddLayoutFlags(CLI::App* s, LayoutFlags* f) {
  s->add_option("--layout", f->preset, "Layout preset: engram-demo | deepseek-v4.1");
  s->add_option("--tokenizer", f->tokenizer, "HF tokenizer.json (canonical-id map; text input)");
  f->o_addr = s->add_option("--addressing", f->addressing,
                            "native (XXH3, power-of-two buckets) | deepseek (mod prime)");
  f->o_seed =
      s->add_option("--hash-seed", f->hash_seed, "Table seed of the addressing (default 0)");
  f->o_layers = s->add_option("--layers", f->layers, "Engram layer ids, e.g. 1,15");
  f->o_order = s->add_option("--order", f->order, "Max n-gram order N (orders 2..N)");
  f->o_heads = s->add_option("--heads", f->heads, "Hash heads per order");
  f->o_buckets = s->add_option("--buckets", f->buckets,
                               "Buckets per sub-table (native: power of two, e.g. 1M)");
  f->o_base = s->add_option("--base-sizes", f->base_sizes,
                            "deepseek: prime search base per order, e.g. 646400,646400");
  f->o_row_dim = s->add_option("--row-dim", f->row_dim, "Values per row (embed_dim / n_heads)");
  f->o_dtype =
      s->add_option("--dtype", f->dtype, "Row storage: f32 | bf16 | f16 | fp8-e4m3 | int8 | int4");
  f->o_pad = s->add_option("--pad-id", f->pad_id,
                           "Tokenizer id of the pad token (its canonical id pads history)");
  f->o_vocab = s->add_option("--vocab-size", f->vocab,
                             "Canonical vocabulary size when there is no tokenizer");
}

void ApplyLayoutFlags(const LayoutFlags& f, engram::format::LayoutRequest* r) {
  if (!f.preset.empty()) r->preset = f.preset;
  if (!f.tokenizer.empty()) r->tokenizer_path = f.tokenizer;
  if (f.o_addr->count()) r->addressing = f.addressing;
  if (f.o_seed->count()) r->seed = f.hash_seed;
  if (f.o_layers->count()) {
    std::vector<uint32_t> ids;
    for (uint64_t v : ParseUintList(f.layers, "--layers")) ids.push_back(static_cast<uint32_t>(v));
    r->layer_ids = ids;
  }
  if (f.o_order->count()) r->max_order = f.order;
  if (f.o_heads->count()) r->n_heads = f.heads;
  if (f.o_buckets->count()) r->buckets = engram::base::ParseSize(f.buckets, "--buckets");
  if (f.o_base->count()) r->base_sizes = ParseUintList(f.base_sizes, "--base-sizes");
  if (f.o_row_dim->count()) r->row_dim = f.row_dim;
  if (f.o_pad->count()) r->pad_token = f.pad_id;
  if (f.o_vocab->count()) r->vocab_size = f.vocab;
  if (f.o_dtype->count()) {
    auto dt = engram::base::ParseDType(f.dtype);
    ENGRAM_CHECK(dt.has_value(), engram::Code::kInvalidArgument,
                 "--dtype " << f.dtype << ": use f32, bf16, f16, fp8-e4m3, int8 or int4");
    r->dtype = *dt;
  }
}

CLI::Validator NumberIn(double lo, double hi, bool lo_inclusive) {
  return CLI::Validator(
      [lo, hi, lo_inclusive](std::string& v) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x)) return "";  // the option's own parse reports it
        auto num = [](double d) {
          std::ostringstream os;
          os << d;
          return os.str();
        };
        if (!std::isfinite(x)) return "must be a finite number, not " + v;
        if (lo_inclusive ? x < lo : x <= lo)
          return "is " + v + "; it must be " + (lo_inclusive ? "at least " : "above ") + num(lo);
        if (x > hi) return "is " + v + "; it must be at most " + num(hi);
        return "";
      },
      "", "");
}

void AddModelFlags(CLI::App* s, engram::model::RunOptions* o) {
  s->add_option("--config", o->config_path,
                "config.toml ([model], [moe], [engram], [engram.table], [inference], [api])");
  s->add_option("-m,--model", o->model_dir, "Model directory (overrides [model] path)");
  s->add_option("--table", o->table_path,
                "Engram table (overrides [engram.table] path and ENGRAM_TABLE_PATH)");
  s->add_option("-t,--threads", o->threads, "Compute threads (default: all cores)");
  s->add_option("--device", o->device, "cpu | cuda:N (default: [model] device)");
  s->add_option("--dtype", o->dtype, "Compute dtype: float32 | bfloat16 (default: [model] dtype)");
  s->add_option("--kv-cache-dtype", o->kv_cache_dtype,
                "auto | f32 | bf16 | fp8 (default: [inference] kv_cache_dtype)");
  s->add_option("--batch", o->max_batch,
                "Requests generated together (default: [inference] max_batch_size)");
}

}  // namespace engramctl

// What run, serve's session and append --fit share inside the model module: the config, model
// and table checks with the [engram] load lines. Internal to libengram_model.so.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/reporter.h"
#include "engram/config/config.h"
#include "engram/format/view.h"
#include "engram/model/model_config.h"
#include "engram/model/run.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::model {

struct Setup {
  config::Config cfg;
  ModelConfig mc;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::vector<uint32_t> canon;  // tokenizer id -> canonical id
  std::unique_ptr<format::TableView> view;
  std::vector<size_t> table_layer;  // Engram layer k -> index in the table's layer_ids
  bool engram = false;

  // The canonical id of a tokenizer id (0 for one outside the map).
  uint32_t Canonical(uint32_t id) const { return id < canon.size() ? canon[id] : 0; }
  std::vector<uint32_t> Canonical(const std::vector<uint32_t>& ids) const {
    std::vector<uint32_t> out;
    out.reserve(ids.size());
    for (uint32_t id : ids) out.push_back(Canonical(id));
    return out;
  }
};

// Throws kInvalidArgument listing every way the table at `path` does not fit the model (order,
// heads, row width, addressing, buckets, layers, tokenizer fingerprint).
void CheckTableAgainstModel(const format::Layout& l, const ModelConfig& mc, uint64_t tok_fp,
                            const std::string& path);

// Every problem run would refuse the config of o.config_path for before loading weights: the
// device, the model directory (config.json, weights), [moe] against config.json, the tokenizer,
// the table's layout against the model. Each message names the config line or file. verify
// --config asks for them through engram_model_setup_problems_v1 (run.h).
std::vector<std::string> SetupProblems(const RunOptions& o);

// Config, model directory, tokenizer and table checks, and the first four [engram] load lines.
void LoadSetup(const RunOptions& o, base::Reporter& rep, Setup& s, RunResult& res);

// "[engram] table loaded in 12.4s, gpu footprint: 0.0 GB" (seconds with a decimal point, as the
// deployment notes show it).
std::string TableLoadedLine(double seconds, uint64_t device_bytes);

}  // namespace engram::model

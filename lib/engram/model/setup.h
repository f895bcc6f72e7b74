// What run, serve's session and append --fit share inside the model module: the config, model
// and table checks with the [engram] load lines. Internal to libengram_model.so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/config/config.h"
#include "engram/model/model_config.h"
#include "engram/model/run.h"
#include "engram/table/view.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::model {

struct Setup {
  config::Config cfg;
  ModelConfig mc;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::vector<uint32_t> canon;  // tokenizer id -> canonical id
  std::unique_ptr<table::TableView> view;
  std::vector<size_t> table_layer;  // Engram layer k -> index in the table's layer_ids
  bool engram = false;
};

// Config, model directory, tokenizer and table checks, and the first four [engram] load lines.
void LoadSetup(const RunOptions& o, base::Reporter& rep, Setup& s, RunResult& res);

// "[engram] table loaded in 12.4s, gpu footprint: 0.0 GB" (seconds with a decimal point, as the
// deployment notes show it).
std::string TableLoadedLine(double seconds, uint64_t device_bytes);

}  // namespace engram::model

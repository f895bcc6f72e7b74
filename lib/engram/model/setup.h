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

// Config, model directory, tokenizer and table checks, and the first four [engram] load lines.
void LoadSetup(const RunOptions& o, base::Reporter& rep, Setup& s, RunResult& res);

// "[engram] table loaded in 12.4s, gpu footprint: 0.0 GB" (seconds with a decimal point, as the
// deployment notes show it).
std::string TableLoadedLine(double seconds, uint64_t device_bytes);

// The plugin's C entry points: runs body(), turning an engram::Error into (*error, *error_code)
// and any other exception into an internal error. Returns 0 on success, 1 on failure.
template <class Body>
int CatchForCaller(Body&& body, std::string* error, int* error_code) noexcept {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    *error = e.what();
    *error_code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    *error = std::string("internal error in the model module: ") + e.what();
    *error_code = static_cast<int>(Code::kInternal);
  }
  return 1;
}

}  // namespace engram::model

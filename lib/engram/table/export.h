// `engramctl export`: a table's rows (with the journal overlay applied, as lookups see them) as
// safetensors, so a training framework can continue from the table; `build --values` reads them
// back bit-exact.
#pragma once

#include <cstdint>
#include <string>

#include "engram/base/reporter.h"

namespace engram::table {

struct ExportOptions {
  std::string table;
  std::string output;                          // a .safetensors file, or a directory when sharded
  std::string tensor = "engram.table.weight";  // "{layer}" = one tensor per Engram layer
  std::string scale_tensor = "engram.table.scale";  // fp8-e4m3, int8 and int4 tables only
  bool scale_tensor_given = false;  // --scale-tensor was given: refused for a table without scales
  uint64_t max_shard_bytes = 0;     // > 0: shard files of at most this size + index
};

struct ExportResult {
  uint64_t bytes = 0;
  uint32_t files = 0, tensors = 0;
  uint64_t journal_rows = 0;  // rows taken from the journal overlay
};

ExportResult Export(const ExportOptions& opts, base::Reporter& reporter);

}  // namespace engram::table

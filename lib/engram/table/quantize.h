// `engramctl quantize`: a table converted to another row dtype (f32, bf16, f16, fp8-e4m3, int8,
// int4), as a new file. Rows stream through in bounded memory; owners, STATS, the fact ledger and
// provenance are kept; an unfolded journal is folded into the output (the input is not changed).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engram/base/dtype.h"
#include "engram/base/reporter.h"
#include "engram/format/reader.h"
#include "engram/format/view.h"

namespace engram::table {

// How far converted rows lie from their source: sums over rows, in double.
struct RowError {
  uint64_t rows = 0;
  double sq_err = 0;   // sum of ||converted - source||^2
  double sq_norm = 0;  // sum of ||source||^2
  double max_abs = 0;  // the largest |converted - source| of any value
  // sqrt(sq_err / sq_norm): the relative L2 error of the rows as one vector (0 for zero rows).
  double rel_l2() const noexcept;
  void Add(const RowError& o) noexcept;
};

struct QuantizeOptions {
  std::string input;
  std::string output;  // written as a temp file, renamed into place when complete
  base::DType dtype = base::DType::kF32;
  int threads = 0;  // 0 = all cores
};

struct QuantizeResult {
  base::DType from = base::DType::kF32, to = base::DType::kF32;
  uint64_t rows = 0;
  uint64_t input_bytes = 0, output_bytes = 0;  // whole files
  uint64_t journal_entries = 0;                // folded into the output from the input's journal
  uint64_t facts = 0;                          // ledger facts carried
  RowError error;                              // over every row
  double seconds = 0;
};

// Throws kInvalidArgument (same dtype, a value the target cannot hold, output = input), kIo,
// base::Interrupted (SIGINT/SIGTERM after CatchInterrupts: nothing is left behind).
QuantizeResult Quantize(const QuantizeOptions& o, base::Reporter& reporter);

// The error of `rows` (row indexes, any order, repeats counted once) of `converted` against
// `source` (through its journal), two tables of the same layout.
RowError CompareRows(const format::TableView& source, const format::TableView& converted,
                     std::span<const uint64_t> rows);

}  // namespace engram::table

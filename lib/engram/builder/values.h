// Row values of a new table: copied bit-exact from a checkpoint (one tensor, or one per Engram
// layer, fp8 scales too; --tile-values repeats a smaller table's rows) or drawn from N(0, std).
// Internal to the builder (build and merge write values the same way).
#pragma once

#include <cstdint>

#include "engram/base/reporter.h"
#include "engram/builder/build.h"
#include "engram/format/layout.h"

namespace engram::builder {

// Copies o.values_path's tensors into rows (and fp8 scales) of `layout`. Shapes and dtypes are
// checked (kInvalidArgument naming the tensor); bytes stream through a bounded buffer.
void CopyValues(const BuildOptions& o, const format::Layout& layout, uint8_t* rows, uint8_t* scales,
                base::Reporter& reporter);

// Fills rows with N(0, std) values from a counter-based generator (reproducible per seed and
// independent of thread count).
void FillNormal(const format::Layout& layout, uint64_t seed, double std, uint8_t* rows,
                uint8_t* scales, int threads);

}  // namespace engram::builder

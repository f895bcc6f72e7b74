// Row gathers decoded to f32: the CPU counterpart of kernels::DeviceRows::Gather and the code
// `run` uses on CPU to fetch each step's Engram rows.
#pragma once

#include <cstdint>
#include <span>

#include "engram/format/reader.h"
#include "engram/format/view.h"

namespace engram::table {

// out[i * row_dim + j] = value j of row rows[i] (journal overlay applied for a view). Every row
// must be < layout().total_rows.
void GatherRowsF32(const format::TableView& view, std::span<const uint64_t> rows,
                   float* out) noexcept;
void GatherRowsF32(const format::Reader& reader, std::span<const uint64_t> rows,
                   float* out) noexcept;

}  // namespace engram::table

// Row gathers decoded to f32 (see gather.h).
#include "engram/table/gather.h"

namespace engram::table {

void GatherRowsF32(const format::TableView& view, std::span<const uint64_t> rows,
                   float* out) noexcept {
  const uint32_t d = view.layout().row_dim;
  for (size_t i = 0; i < rows.size(); ++i)
    view.DecodeRowTo(rows[i], std::span<float>(out + i * d, d));
}

void GatherRowsF32(const format::Reader& reader, std::span<const uint64_t> rows,
                   float* out) noexcept {
  const uint32_t d = reader.layout().row_dim;
  for (size_t i = 0; i < rows.size(); ++i)
    reader.DecodeRowTo(rows[i], std::span<float>(out + i * d, d));
}

}  // namespace engram::table

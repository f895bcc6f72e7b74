// Export: rows streamed from the mapped table into safetensors writers, journal rows patched in.
#include "engram/table/export.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/format/safetensors.h"
#include "engram/format/view.h"

namespace engram::table {

namespace {

struct Piece {
  std::string name;
  bool scales;
  uint64_t first_row, rows, bytes;
  uint32_t layer_id;
};

}  // namespace

ExportResult Export(const ExportOptions& o, base::Reporter& reporter) {
  format::ViewOptions vo;
  vo.deterministic_addressing = false;
  vo.open.lock = format::ReadLock::kHold;  // no fold changes rows while they are written out
  auto view = format::TableView::Open(o.table, vo);
  const format::Layout& l = view->layout();
  const bool per_layer = o.tensor.find("{layer}") != std::string::npos;
  const bool fp8 = l.scale_stride() > 0;  // any scaled dtype: fp8-e4m3, int8, int4
  ENGRAM_CHECK(fp8 || !o.scale_tensor_given, Code::kInvalidArgument,
               "--scale-tensor: " << o.table << " stores " << base::DTypeName(l.dtype)
                                  << " rows, which have no scales (only fp8-e4m3, int8 and int4 "
                                     "tables do); drop the flag");
  // The tensors' dtypes and widths: values as stored (int4: two a byte, U8), and the scales:
  // e8m0 bytes (fp8), one f32 a row (int8), one f16 a block (int4).
  const format::StDType value_dt = format::StDTypeOf(l.dtype);
  const format::StDType scale_dt = l.dtype == base::DType::kI8   ? format::StDType::kF32
                                   : l.dtype == base::DType::kI4 ? format::StDType::kF16
                                                                 : format::StDType::kF8E8M0;
  const uint64_t value_cols = l.row_stride() / format::StDTypeSize(value_dt),
                 scale_cols = l.scale_stride() / format::StDTypeSize(scale_dt);
  std::vector<Piece> pieces;
  for (size_t li = 0; li < (per_layer ? l.spec.n_layers() : 1); ++li) {
    const uint64_t first = per_layer ? l.SubtableBegin(li * l.spec.per_layer()) : 0;
    const uint64_t end = per_layer ? l.SubtableBegin((li + 1) * l.spec.per_layer()) : l.total_rows;
    uint32_t id = l.spec.layer_ids[li];
    pieces.push_back({format::TensorNameFor(o.tensor, id), false, first, end - first,
                      (end - first) * l.row_stride(), id});
    if (fp8)
      pieces.push_back({format::TensorNameFor(o.scale_tensor, id), true, first, end - first,
                        (end - first) * l.scale_stride(), id});
  }
  // Files: everything in one, or whole tensors packed into shards of at most max_shard_bytes.
  std::vector<std::vector<size_t>> files(1);
  if (o.max_shard_bytes > 0) {
    uint64_t in_file = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      ENGRAM_CHECK(
          pieces[i].bytes <= o.max_shard_bytes, Code::kInvalidArgument,
          "tensor \""
              << pieces[i].name << "\" is " << pieces[i].bytes
              << " bytes, more than --max-shard-size; "
              << "export one tensor per layer (--tensor 'name.{layer}.weight') or raise the size");
      if (!files.back().empty() && in_file + pieces[i].bytes > o.max_shard_bytes) {
        files.emplace_back();
        in_file = 0;
      }
      files.back().push_back(i);
      in_file += pieces[i].bytes;
    }
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) files[0].push_back(i);
  }
  const bool sharded = files.size() > 1 || o.max_shard_bytes > 0;
  if (sharded) ::mkdir(o.output.c_str(), 0755);
  std::map<std::string, std::string> meta = {
      {"format", "pt"},
      {"engram_dtype", std::string(base::DTypeName(l.dtype))},
      {"engram_addressing", std::string(hash::AddressingName(l.spec.mode))},
      {"engram_rows", std::to_string(l.total_rows)},
      {"engram_row_dim", std::to_string(l.row_dim)}};
  ExportResult res;
  std::string index = "{\"metadata\":{\"total_size\":";
  uint64_t total = 0;
  for (const auto& p : pieces) total += p.bytes;
  index += std::to_string(total) + "},\"weight_map\":{";
  const uint64_t chunk_rows = std::max<uint64_t>(1, (64ull << 20) / l.row_stride());
  std::vector<uint8_t> buf;
  uint64_t done = 0;
  bool first_entry = true;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", fi + 1, files.size());
    std::string path = sharded ? o.output + "/" + name : o.output;
    std::vector<format::SafetensorsWriter::Spec> specs;
    for (size_t i : files[fi]) {
      const Piece& p = pieces[i];
      specs.push_back(
          {p.name, p.scales ? scale_dt : value_dt, {p.rows, p.scales ? scale_cols : value_cols}});
      index += std::string(first_entry ? "" : ",") + base::JsonString(p.name) + ":" +
               base::JsonString(name);
      first_entry = false;
    }
    format::SafetensorsWriter w(path, specs, meta);
    for (size_t k = 0; k < files[fi].size(); ++k) {
      const Piece& p = pieces[files[fi][k]];
      const uint32_t stride = p.scales ? l.scale_stride() : l.row_stride();
      for (uint64_t r0 = 0; r0 < p.rows; r0 += chunk_rows) {
        uint64_t n = std::min(chunk_rows, p.rows - r0);
        const uint64_t row = p.first_row + r0;
        const uint8_t* src =
            p.scales ? view->reader().ScaleBytes(row) : view->reader().RowBytes(row);
        buf.assign(src, src + n * stride);
        // Read once: unmapped again, so exporting a table larger than memory stays bounded.
        if (view->reader().mapped()) base::ReleaseMappedPages(src, n * stride);
        // The journal overlay: last committed writer wins, as lookups see it.
        for (const auto& [jrow, idx] : view->journal().overlay) {
          if (jrow < row || jrow >= row + n) continue;
          const format::JournalEntry& e = view->journal().committed[idx];
          std::memcpy(buf.data() + (jrow - row) * stride,
                      e.value.data() + (p.scales ? l.row_stride() : 0), stride);
          if (!p.scales) res.journal_rows++;
        }
        w.Write(k, r0 * stride, buf.data(), buf.size());
        done += buf.size();
        reporter.Progress("export", done, total, "bytes");
      }
      res.tensors++;
    }
    w.Finish();
    res.files++;
  }
  index += "}}";
  if (sharded) {
    base::TempFile tf(o.output + "/model.safetensors.index.json");
    base::PwriteFull(tf.fd(), index.data(), index.size(), 0, tf.temp_path());
    tf.Commit();
  }
  reporter.ProgressDone("export");
  res.bytes = total;
  return res;
}

}  // namespace engram::table

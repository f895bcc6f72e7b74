// Row values: checkpoint tensors streamed into the table's rows, tiling, and normal init.
#include "engram/builder/values.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "engram/base/checked.h"
#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/units.h"
#include "engram/format/safetensors.h"

namespace engram::builder {

namespace {

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Streams `bytes` of a tensor into dst through a bounded buffer (pread, never the whole file).
void StreamTensor(const format::SafetensorsFile& f, const format::TensorInfo& t, uint8_t* dst,
                  uint64_t bytes, base::Reporter& reporter, uint64_t* done, uint64_t total) {
  const uint64_t chunk = 64ull << 20;
  for (uint64_t off = 0; off < bytes; off += chunk) {
    uint64_t n = std::min(chunk, bytes - off);
    f.ReadRange(t, off, dst + off, n);
    base::ReleaseMappedPages(dst + off, n);  // the page cache keeps them; RSS stays bounded
    *done += n;
    reporter.Progress("import values", *done, total, "bytes");
  }
}

// Spreads `subtables` blocks of `src_rows` rows, packed at the start of `base`, into blocks of
// src_rows * factor rows that repeat their source `factor` times (--tile-values). Back to front:
// block s is written at s * factor * src_rows or later, past every source not yet moved.
void TileRows(uint8_t* base, uint64_t subtables, uint64_t src_rows, uint64_t factor,
              uint64_t stride) {
  const uint64_t src_bytes = src_rows * stride;
  for (uint64_t s = subtables; s-- > 0;) {
    uint8_t* dst = base + s * factor * src_bytes;
    std::memmove(dst, base + s * src_bytes, src_bytes);
    for (uint64_t j = 1; j < factor; ++j) std::memcpy(dst + j * src_bytes, dst, src_bytes);
  }
}

}  // namespace

// Rows (and fp8 scales) from a checkpoint: one tensor for the whole table, or, with "{layer}" in
// the name, one per Engram layer laid out like the reference's MultiHeadEmbedding (orders, then
// heads), which is the table's row order inside a layer. Shapes and dtypes are checked; bytes are
// copied bit-exact through a bounded buffer.
void CopyValues(const BuildOptions& o, const format::Layout& l, uint8_t* rows, uint8_t* scales,
                base::Reporter& reporter) {
  ENGRAM_CHECK(!base::IsIntDType(l.dtype), Code::kInvalidArgument,
               "--values copies rows bit-exact, and "
                   << base::DTypeName(l.dtype)
                   << " rows need scales made from them: build the table with --dtype f32 (or "
                      "the checkpoint's dtype), then 'engramctl quantize TABLE -o OUT --dtype "
                   << base::DTypeName(l.dtype) << "'");
  auto ckpt = format::Checkpoint::Open(o.values_path);
  const bool per_layer = o.values_tensor.find("{layer}") != std::string::npos;
  const bool fp8 = l.dtype == base::DType::kF8E4M3;
  ENGRAM_CHECK(!fp8 || !o.scales_tensor.empty(), Code::kInvalidArgument,
               "fp8 values need their e8m0 scales: give --scale-tensor NAME");
  ENGRAM_CHECK(fp8 || o.scales_tensor.empty(), Code::kInvalidArgument,
               "--scale-tensor applies to fp8 tables only");
  ENGRAM_CHECK(!fp8 || per_layer == (o.scales_tensor.find("{layer}") != std::string::npos),
               Code::kInvalidArgument,
               "--tensor and --scale-tensor must both name one tensor per layer ({layer}) or both "
               "one tensor");
  struct Piece {
    std::string name, scale_name;
    uint64_t first_row, rows;
  };
  std::vector<Piece> pieces;
  if (per_layer) {
    for (size_t li = 0; li < l.spec.n_layers(); ++li) {
      const uint64_t first = l.SubtableBegin(li * l.spec.per_layer());
      const uint64_t end = l.SubtableBegin((li + 1) * l.spec.per_layer());
      pieces.push_back({format::TensorNameFor(o.values_tensor, l.spec.layer_ids[li]),
                        format::TensorNameFor(o.scales_tensor, l.spec.layer_ids[li]), first,
                        end - first});
    }
  } else {
    pieces.push_back({o.values_tensor, o.scales_tensor, 0, l.total_rows});
  }
  const bool native = l.spec.mode == hash::AddressingMode::kNative;
  ENGRAM_CHECK(!o.tile_values || native, Code::kInvalidArgument,
               "--tile-values needs native addressing (deepseek buckets are taken modulo a "
               "prime, so a larger table does not repeat a smaller one)");
  const uint64_t buckets = native ? uint64_t{1} << l.spec.log2_buckets : 0;
  uint64_t total = 0, done = 0, factor = 0;  // factor: rows repeated (the same for every piece)
  // Bytes streamed: a tensor to be tiled holds fewer rows than its piece of the table.
  for (const auto& p : pieces) {
    const uint64_t numel = ckpt->Get(p.name).second->numel();
    total += std::min(p.rows, numel / l.row_dim) * (l.row_stride() + l.scale_stride());
  }
  for (const auto& p : pieces) {
    auto [file, t] = ckpt->Get(p.name);
    const uint64_t want = p.rows * l.row_dim;
    std::string shape;
    for (size_t i = 0; i < t->shape.size(); ++i)
      shape += (i ? "x" : "") + std::to_string(t->shape[i]);
    // A tensor of 2^m buckets per sub-table for a native table of 2^k: tileable when k > m.
    uint64_t f = 0;
    if (native && t->numel() && t->numel() < want && want % t->numel() == 0) {
      f = want / t->numel();
      if ((f & (f - 1)) || buckets % f) f = 0;
    }
    std::string hint = "; check the layout flags or the tensor name";
    if (f)
      hint = "; it holds 2^" + std::to_string(std::countr_zero(buckets / f)) +
             " buckets per sub-table and the table 2^" + std::to_string(l.spec.log2_buckets) +
             ": add --tile-values to repeat each sub-table's rows " + std::to_string(f) +
             "x (exact under native addressing)";
    ENGRAM_CHECK(t->numel() == want || (o.tile_values && f), Code::kInvalidArgument,
                 "tensor \"" << p.name << "\" has shape [" << shape << "] (" << t->numel()
                             << " values), but " << (per_layer ? "that layer" : "the table")
                             << " needs " << p.rows << " rows x " << l.row_dim
                             << " values = " << want << hint);
    if (t->numel() == want) f = 1;
    ENGRAM_CHECK(
        factor == 0 || f == factor, Code::kInvalidArgument,
        "tensor \"" << p.name << "\" has another bucket count than the layers before it; "
                    << "--tile-values repeats every layer's rows the same number of times");
    factor = f;
    ENGRAM_CHECK(t->dtype == format::StDTypeOf(l.dtype), Code::kInvalidArgument,
                 "tensor \"" << p.name << "\" is " << format::StDTypeName(t->dtype)
                             << " but the table stores " << base::DTypeName(l.dtype)
                             << "; pass --dtype matching the tensor (rows are copied bit-exact)");
    const uint64_t src_rows = p.rows / f, subtables = f > 1 ? p.rows / buckets : 1;
    if (fp8) {
      auto [sf, st] = ckpt->Get(p.scale_name);
      ENGRAM_CHECK(st->numel() == src_rows * l.scale_stride(), Code::kInvalidArgument,
                   "scale tensor \"" << p.scale_name << "\" has " << st->numel()
                                     << " values, it needs " << src_rows * l.scale_stride()
                                     << " (one per 32 values)");
      ENGRAM_CHECK(st->dtype == format::StDType::kF8E8M0 || st->dtype == format::StDType::kU8,
                   Code::kInvalidArgument,
                   "scale tensor \"" << p.scale_name << "\" is " << format::StDTypeName(st->dtype)
                                     << "; e8m0 scales are F8_E8M0 or U8");
      // The scales first: each piece of rows is checked against them as it streams in.
      StreamTensor(*sf, *st, scales + p.first_row * l.scale_stride(), src_rows * l.scale_stride(),
                   reporter, &done, total);
    }
    // Rows a piece at a time, each checked for Inf/NaN while it is in cache, then unmapped: one
    // pass over the checkpoint, and resident memory that does not grow with the table.
    const uint64_t stride = l.row_stride(),
                   piece_rows = std::max<uint64_t>(1, (64ull << 20) / stride);
    uint8_t* dst = rows + p.first_row * stride;
    const uint8_t* dst_scales = fp8 ? scales + p.first_row * l.scale_stride() : nullptr;
    for (uint64_t r0 = 0; r0 < src_rows; r0 += piece_rows) {
      const uint64_t n = std::min(piece_rows, src_rows - r0);
      file->ReadRange(*t, r0 * stride, dst + r0 * stride, n * stride);
      for (uint64_t r = r0; r < r0 + n; ++r) {
        const uint8_t* sc = fp8 ? dst_scales + r * l.scale_stride() : nullptr;
        size_t i = base::FirstNonFinite(l.dtype, dst + r * stride, sc, l.row_dim);
        ENGRAM_CHECK(i == l.row_dim, Code::kInvalidArgument,
                     o.values_path << ": tensor \"" << p.name << "\" holds a non-finite value "
                                   << "(Inf or NaN) in table row " << p.first_row + r << ", value "
                                   << i << "; a table's rows must be finite: fix the checkpoint");
      }
      base::ReleaseMappedPages(dst + r0 * stride, n * stride);
      if (fp8) base::ReleaseMappedPages(dst_scales + r0 * l.scale_stride(), n * l.scale_stride());
      done += n * stride;
      reporter.Progress("import values", done, total, "bytes");
    }
    if (f > 1) {
      TileRows(dst, subtables, buckets / f, f, stride);
      if (fp8)
        TileRows(scales + p.first_row * l.scale_stride(), subtables, buckets / f, f,
                 l.scale_stride());
    }
  }
  reporter.ProgressDone("import values");
  std::string tiled;
  if (factor > 1)
    tiled = ", each sub-table's repeated " + std::to_string(factor) + "x into 2^" +
            std::to_string(l.spec.log2_buckets) + " buckets (" + std::to_string(l.total_rows) +
            " rows)";
  reporter.Log(base::LogLevel::kInfo,
               "values: copied " + std::to_string(l.total_rows / factor) + " rows bit-exact from " +
                   o.values_path +
                   (per_layer ? " (" + std::to_string(pieces.size()) + " per-layer tensors)" : "") +
                   tiled);
}

void FillNormal(const format::Layout& l, uint64_t seed, double std_dev, uint8_t* rows,
                uint8_t* scales, int threads) {
  const int64_t n_rows = static_cast<int64_t>(l.total_rows);
  const uint32_t d = l.row_dim;
  const uint32_t stride = l.row_stride(), sstride = l.scale_stride();
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> v(d);
#pragma omp for schedule(static, 4096)
    for (int64_t r = 0; r < n_rows; ++r) {
      uint64_t state = seed ^ (static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull);
      for (uint32_t i = 0; i < d; i += 2) {
        // Box-Muller from two 53-bit uniforms in (0, 1].
        double u1 = (static_cast<double>(SplitMix(&state) >> 11) + 1.0) * 0x1.0p-53;
        double u2 = static_cast<double>(SplitMix(&state) >> 11) * 0x1.0p-53;
        double rad = std::sqrt(-2.0 * std::log(u1)) * std_dev;
        v[i] = static_cast<float>(rad * std::cos(2 * M_PI * u2));
        if (i + 1 < d) v[i + 1] = static_cast<float>(rad * std::sin(2 * M_PI * u2));
      }
      base::EncodeRow(l.dtype, v, rows + static_cast<uint64_t>(r) * stride,
                      scales ? scales + static_cast<uint64_t>(r) * sstride : nullptr);
      if ((r + 1) % 4096 == 0) {  // a block done: unmap it (RSS stays bounded)
        base::ReleaseMappedPages(rows + static_cast<uint64_t>(r + 1 - 4096) * stride,
                                 4096ull * stride);
        if (scales)
          base::ReleaseMappedPages(scales + static_cast<uint64_t>(r + 1 - 4096) * sstride,
                                   4096ull * sstride);
      }
    }
  }
}

}  // namespace engram::builder

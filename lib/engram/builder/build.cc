// Build: resolve layout, stream the corpus, count n-grams, choose owners, fill rows, write.
#include "engram/builder/build.h"

#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <sstream>

#include "engram/base/checked.h"
#include "engram/base/dtype.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/builder/ngram_counter.h"
#include "engram/builder/owners.h"
#include "engram/builder/part.h"
#include "engram/builder/token_stream.h"
#include "engram/builder/zstd_stream.h"
#include "engram/format/safetensors.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

namespace {

constexpr const char* kVersionString = "engramctl 0.1.0";

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

// Rows (and fp8 scales) from a checkpoint: one tensor for the whole table, or, with "{layer}" in
// the name, one per Engram layer laid out like the reference's MultiHeadEmbedding (orders, then
// heads), which is the table's row order inside a layer. Shapes and dtypes are checked; bytes are
// copied bit-exact through a bounded buffer.
void CopyValues(const BuildOptions& o, const format::Layout& l, uint8_t* rows, uint8_t* scales,
                base::Reporter& reporter) {
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
      uint64_t first = l.row_offsets[li * l.spec.per_layer()];
      uint64_t end =
          li + 1 < l.spec.n_layers() ? l.row_offsets[(li + 1) * l.spec.per_layer()] : l.total_rows;
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
    StreamTensor(*file, *t, rows + p.first_row * l.row_stride(), src_rows * l.row_stride(),
                 reporter, &done, total);
    if (f > 1)
      TileRows(rows + p.first_row * l.row_stride(), subtables, buckets / f, f, l.row_stride());
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
      StreamTensor(*sf, *st, scales + p.first_row * l.scale_stride(), src_rows * l.scale_stride(),
                   reporter, &done, total);
      if (f > 1)
        TileRows(scales + p.first_row * l.scale_stride(), subtables, buckets / f, f,
                 l.scale_stride());
    }
  }
  reporter.ProgressDone("import values");
  for (uint64_t r = 0; r < l.total_rows; ++r) {
    const uint8_t* sc = fp8 ? scales + r * l.scale_stride() : nullptr;
    size_t i = base::FirstNonFinite(l.dtype, rows + r * l.row_stride(), sc, l.row_dim);
    ENGRAM_CHECK(i == l.row_dim, Code::kInvalidArgument,
                 o.values_path << ": tensor \"" << o.values_tensor << "\" holds a non-finite value "
                               << "(Inf or NaN) in table row " << r << ", value " << i
                               << "; a table's rows must be finite: fix the checkpoint");
  }
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

std::string Provenance(const BuildOptions& o, const TokenStreamStats& st, uint64_t created) {
  std::string j =
      "{\"creator\":" + base::JsonString(kVersionString) +
      ",\"command\":" + base::JsonString(o.command_line) +
      ",\"created_unix\":" + std::to_string(created) +
      ",\"owner_mode\":" + base::JsonString(o.owners) + ",\"tokens\":" + std::to_string(st.tokens) +
      ",\"documents\":" + std::to_string(st.documents) + ",\"init\":" +
      base::JsonString(o.values_path.empty() ? o.init : "safetensors:" + o.values_tensor) +
      ",\"inputs\":[";
  bool first = true;
  for (const auto* list : {&o.token_files, &o.corpus_files})
    for (const auto& f : *list) {
      j += (first ? "" : ",") + std::string("{\"path\":") + base::JsonString(f) + "}";
      first = false;
    }
  j += "]}";
  return j;
}

}  // namespace

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
    }
  }
}

namespace {

base::Json OptionsJson(const BuildOptions& o) {
  using base::Json;
  return Json::MakeObject({{"init", Json::MakeString(o.init)},
                           {"init_seed", Json::MakeString(std::to_string(o.init_seed))},
                           {"init_std", Json::MakeString(std::to_string(o.init_std))},
                           {"values_path", Json::MakeString(o.values_path)},
                           {"values_tensor", Json::MakeString(o.values_tensor)},
                           {"scales_tensor", Json::MakeString(o.scales_tensor)},
                           {"tile_values", Json::MakeNumber(o.tile_values ? 1 : 0)},
                           {"with_stats", Json::MakeNumber(o.with_stats ? 1 : 0)},
                           {"chunk_log2", Json::MakeNumber(o.chunk_log2)},
                           {"owners", Json::MakeString(o.owners)}});
}

void ApplyOptionsJson(const base::Json& j, BuildOptions* o) {
  auto str = [&](const char* k) {
    const base::Json* v = j.Find(k);
    return v && v->is_string() ? v->as_string() : std::string();
  };
  o->init = str("init");
  o->init_seed = std::stoull(str("init_seed"));
  o->init_std = std::stod(str("init_std"));
  o->values_path = str("values_path");
  o->values_tensor = str("values_tensor");
  o->scales_tensor = str("scales_tensor");
  o->owners = str("owners");
  o->tile_values = j.Find("tile_values") && j.Find("tile_values")->as_uint64().value_or(0) != 0;
  o->with_stats = j.Find("with_stats") && j.Find("with_stats")->as_uint64().value_or(1) != 0;
  o->chunk_log2 = static_cast<uint32_t>(
      j.Find("chunk_log2") ? j.Find("chunk_log2")->as_uint64().value_or(format::kDefaultChunkLog2)
                           : format::kDefaultChunkLog2);
}

// How build and merge write the table of options `o`.
format::WriterOptions WriterOptionsFor(const BuildOptions& o, int threads) {
  format::WriterOptions wo;
  wo.chunk_log2 = o.chunk_log2;
  wo.with_stats = o.with_stats;
  wo.sketch_owners = o.owners == "sketch";
  wo.threads = threads;
  return wo;
}

// Values, provenance and commit: everything after owners, shared by build and merge.
void FinishTable(format::TableWriter& writer, const format::Layout& layout, const BuildOptions& o,
                 const std::string& provenance, int threads, BuildResult* res,
                 base::Reporter& reporter) {
  for (uint64_t r = 0; r < layout.total_rows; ++r)
    res->owned_rows += writer.tags()[r] != hash::kNoOwner;
  if (!o.values_path.empty())
    CopyValues(o, layout, writer.rows(), writer.scales(), reporter);
  else if (o.init == "normal")
    FillNormal(layout, o.init_seed, o.init_std, writer.rows(), writer.scales(), threads);
  else if (layout.dtype == base::DType::kF8E4M3)
    std::memset(writer.scales(), 127, layout.total_rows * layout.scale_stride());
  // What the table scores on its own corpus (owner counts / occurrences over every sub-table):
  // run and serve explain a request's hit rate against it.
  std::string prov = provenance;
  const double share =
      writer.stats()
          ? format::OwnerShare({writer.stats(), layout.total_rows * format::kStatsRowSize})
          : -1;
  if (share >= 0 && !prov.empty() && prov.back() == '}') {
    char rate[64];
    std::snprintf(rate, sizeof rate, ",\"corpus_hit_rate\":%.6f}", share);
    prov.pop_back();
    prov += rate;
  }
  writer.SetProvenance(prov);
  writer.Commit(reporter);
}

}  // namespace

BuildResult Build(const BuildOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  BuildResult res;
  // Everything that can be checked before reading input is checked first.
  ENGRAM_CHECK(!o.output.empty() || o.dry_run, Code::kInvalidArgument,
               "no output path; give -o TABLE");
  ENGRAM_CHECK(o.init == "zeros" || o.init == "normal", Code::kInvalidArgument,
               "--init " << o.init << ": use zeros or normal (or --values FILE --tensor NAME)");
  ENGRAM_CHECK(o.values_path.empty() == o.values_tensor.empty(), Code::kInvalidArgument,
               "--values and --tensor go together: name the safetensors file and the tensor in it");
  ENGRAM_CHECK(o.owners == "exact" || o.owners == "sketch", Code::kInvalidArgument,
               "--owners " << o.owners
                           << ": use exact (exact counts, spills to --temp-dir) or sketch (bounded "
                              "memory, no temp disk)");
  ENGRAM_CHECK(o.init_std > 0 && std::isfinite(o.init_std), Code::kInvalidArgument,
               "--init-std must be > 0");
  ENGRAM_CHECK(o.corpus_files.empty() || !o.layout.tokenizer_path.empty(), Code::kInvalidArgument,
               "--corpus needs a tokenizer: give --tokenizer tokenizer.json or [model] tokenizer "
               "in the config");
  ENGRAM_CHECK(o.shard_count >= 1 && o.shard_index < o.shard_count, Code::kInvalidArgument,
               "bad --shard");
  if (!o.dry_run) base::RequireParentDir(o.output);
  format::Layout layout = format::ResolveLayout(o.layout);
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  const bool sharded = o.shard_count > 1;
  const uint64_t memory = o.memory_bytes ? o.memory_bytes : DefaultBuildMemory();
  const std::string temp_dir = o.temp_dir.empty()
                                   ? base::DirName(o.output.empty() ? std::string("x") : o.output)
                                   : o.temp_dir;
  const format::WriterOptions wo = WriterOptionsFor(o, threads);
  res.plan = format::PlanSizes(layout, wo);

  TokenStreamOptions so;
  so.token_files = o.token_files;
  so.corpus_files = o.corpus_files;
  so.tokenizer_path = o.layout.tokenizer_path;
  so.doc_per_file = o.doc_per_file;
  so.ids_are_canonical = o.ids_are_canonical;
  so.threads = threads;
  so.block_ids = std::max<size_t>(o.block_tokens, 64);
  // Exact shards split the corpus; sketch shards read it all and split the sub-tables.
  if (o.owners == "exact") {
    so.shard_index = o.shard_index;
    so.shard_count = o.shard_count;
  }
  const uint64_t input_bytes = InputBytes(so);
  // Text is about 4 bytes a token, as u32 ids are. An exact shard counts ~1/N of the input.
  const uint64_t approx_tokens = (input_bytes / 4 + (o.owners == "exact" ? o.shard_count - 1 : 0)) /
                                 (o.owners == "exact" ? o.shard_count : 1);
  const uint32_t orders = layout.spec.max_order - 1;
  if (o.owners == "exact") {
    uint64_t need = 0, record_bytes = 0;
    for (uint32_t n = hash::kMinOrder; n <= layout.spec.max_order; ++n) {
      need += approx_tokens * NgramCounter::BytesPerEntry(n);
      record_bytes += approx_tokens * (n * 4 + 8);
    }
    // A shard keeps no table in memory; a whole build chooses owners in 16 bytes a row.
    res.ram_estimate =
        std::min(need, memory) + (sharded ? 0 : layout.total_rows * 16) + (128ull << 20);
    // Spill runs hold at most every n-gram once per run, zstd-compressed (about 2x).
    res.temp_estimate =
        need > memory ? approx_tokens * orders * (layout.spec.max_order * 4 + 8) / 2 : 0;
    if (sharded) res.part_estimate = record_bytes / 2;  // at most one record per token and order
  } else {
    res.ram_estimate = layout.total_rows * 16 +
                       2 * (16ull << 20) * (layout.spec.max_order + orders) + (128ull << 20);
    res.temp_estimate = 0;
    if (sharded) res.part_estimate = layout.total_rows * 16 / o.shard_count;
  }
  if (sharded) {
    // merge: the table is written through a mapping, plus the parts open at once.
    res.merge_ram_estimate =
        res.plan.file_size +
        std::min<uint64_t>(o.shard_count, memory / (8ull << 20)) * (8ull << 20) + (128ull << 20);
  }
  res.layout = layout;
  if (o.dry_run) {
    res.dry_run = true;
    res.seconds = sw.Seconds();
    return res;
  }

  // Count: blocks are gathered in batches of `threads` and counted in parallel.
  std::unique_ptr<ExactCounter> exact;
  std::unique_ptr<SketchOwners> sketch;
  if (o.owners == "exact")
    exact = std::make_unique<ExactCounter>(layout.spec, memory, temp_dir, threads, reporter);
  else
    sketch = std::make_unique<SketchOwners>(layout, threads, o.shard_index, o.shard_count);
  struct Owned {
    std::vector<uint32_t> context, ids;
  };
  std::vector<Owned> batch;  // blocks counted together: each thread its share of every block
  uint64_t done_tokens = 0;
  const uint64_t est_tokens = std::max<uint64_t>(approx_tokens, 1);  // already this shard's
  base::Stopwatch count_sw;
  auto run_batch = [&] {
    std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int share = 0; share < threads; ++share) {
      try {
        for (const Owned& o : batch) {
          TokenBlock b;
          b.context = o.context;
          b.ids = o.ids;
          exact->AddBlock(b, share);
        }
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    batch.clear();
  };
  TokenStreamStats st;
  if (!o.token_files.empty() || !o.corpus_files.empty()) {
    st = StreamTokens(
        so, layout,
        [&](const TokenBlock& b) {
          done_tokens += b.ids.size();
          if (sketch) {
            sketch->AddBlock(b);
          } else {
            batch.push_back({std::vector<uint32_t>(b.context.begin(), b.context.end()),
                             std::vector<uint32_t>(b.ids.begin(), b.ids.end())});
            if (static_cast<int>(batch.size()) >= threads) run_batch();
          }
          reporter.Progress("count n-grams", done_tokens, std::max(est_tokens, done_tokens),
                            "tokens");
        },
        reporter);
    if (exact && !batch.empty()) run_batch();
    reporter.ProgressDone("count n-grams");
    if (st.replaced_utf8)
      reporter.Log(base::LogLevel::kNote,
                   "corpus: " + std::to_string(st.replaced_utf8) +
                       " invalid UTF-8 sequences were replaced with U+FFFD before tokenizing");
  }
  res.tokens = st.tokens;
  res.documents = st.documents;
  res.range_begin = st.range_begin;
  res.range_end = st.range_end;
  res.range_total = st.range_total;
  res.range_in_bytes = st.range_in_bytes;
  res.count_seconds = count_sw.Seconds();
  base::Stopwatch assign_sw;
  if (exact) {
    res.spill_runs = exact->runs();
    res.spilled_bytes = exact->spilled_bytes();
  }
  if (exact && exact->runs())
    reporter.Log(base::LogLevel::kInfo,
                 "counting spilled " + std::to_string(exact->runs()) + " sorted runs (" +
                     base::FormatBytes(exact->spilled_bytes()) + " zstd) to " + temp_dir);

  if (sharded) {
    PartHeader h;
    h.mode = o.owners;
    h.shard_index = o.shard_index;
    h.shard_count = o.shard_count;
    h.tokens = st.tokens;
    h.documents = st.documents;
    h.options = OptionsJson(o);
    h.layout = layout;
    base::TempFile tf(o.output);
    {
      ZstdWriter w(tf.temp_path(), 3);
      std::string hdr = EncodePartHeader(h);
      w.Write(hdr.data(), hdr.size());
      if (exact)
        exact->WriteMerged(w);
      else
        sketch->WriteCells(w);
      w.Close(true);
    }
    tf.Commit();
    res.seconds = sw.Seconds();
    return res;
  }

  format::TableWriter writer(o.output, layout, wo);
  OwnerArrays oa{writer.tags(), writer.stats(), {}};
  if (!oa.stats) oa.own.assign(layout.total_rows, 0);
  if (exact) {
    res.ngrams_distinct = exact->AssignOwners(layout, &oa, [&](uint64_t done, uint64_t total) {
      reporter.Progress("assign owners", done, total, "counts");
    });
  } else {
    sketch->Finish(&oa);
  }
  reporter.ProgressDone("assign owners");
  res.assign_seconds = assign_sw.Seconds();
  exact.reset();  // spill runs go now
  sketch.reset();
  FinishTable(writer, layout, o, Provenance(o, st, base::UnixNow()), threads, &res, reporter);
  res.seconds = sw.Seconds();
  return res;
}

namespace {

// What one open part costs while it is merged: the zstd window (level 3: up to 8 MiB with long
// inputs; 2 MiB typical) and its input buffer. --memory / this = parts merged at once.
constexpr uint64_t kMergeBytesPerPart = 8ull << 20;

// Reads the part headers one at a time (nothing stays open), checks that they belong to one build
// and that no shard is covered twice. *seen[k] = the part covering shard k, or -1.
std::vector<PartHeader> ReadPartHeaders(const std::vector<std::string>& parts,
                                        std::vector<int>* seen) {
  std::vector<PartHeader> headers;
  for (const auto& p : parts) {
    ZstdReader r(p);
    headers.push_back(ReadPartHeader(r));
  }
  const PartHeader& h0 = headers[0];
  seen->assign(h0.shard_count, -1);
  for (size_t i = 0; i < headers.size(); ++i) {
    std::string why = DescribePartMismatch(h0, headers[i]);
    ENGRAM_CHECK(why.empty(), Code::kInvalidArgument,
                 parts[i] << " does not belong to the same build as " << parts[0] << ": " << why);
    for (uint32_t k : headers[i].shards) {
      ENGRAM_CHECK((*seen)[k] < 0, Code::kInvalidArgument,
                   parts[i] << " and " << parts[(*seen)[k]] << " are both shard " << k << "/"
                            << h0.shard_count);
      (*seen)[k] = static_cast<int>(i);
    }
  }
  return headers;
}

// A part opened and read past its header, at its records (or sketch cells).
std::unique_ptr<ZstdReader> OpenPartBody(const std::string& path) {
  auto r = std::make_unique<ZstdReader>(path);
  ReadPartHeader(*r);
  return r;
}

// Writes one exact part covering every shard of `parts` (their headers in `headers`): counts of
// equal n-grams add, so merging merged parts gives what merging the shards' parts gives. Returns
// the header it wrote.
PartHeader WritePartialMerge(const std::vector<std::string>& parts,
                             const std::vector<PartHeader>& headers, const std::string& out) {
  PartHeader h = headers[0];
  h.shards.clear();
  h.tokens = h.documents = 0;
  for (const auto& x : headers) {
    h.shards.insert(h.shards.end(), x.shards.begin(), x.shards.end());
    h.tokens += x.tokens;
    h.documents += x.documents;
  }
  std::sort(h.shards.begin(), h.shards.end());
  h.shard_index = h.shards[0];
  std::vector<std::unique_ptr<ZstdReader>> readers;
  std::vector<ZstdReader*> rs;
  for (const auto& p : parts) {
    readers.push_back(OpenPartBody(p));
    rs.push_back(readers.back().get());
  }
  base::TempFile tf(out);
  {
    ZstdWriter w(tf.temp_path(), 3);
    std::string hdr = EncodePartHeader(h);
    w.Write(hdr.data(), hdr.size());
    WriteMergedPartStreams(rs, h.layout.spec.max_order, w);
    w.Close(true);
  }
  tf.Commit();
  return h;
}

}  // namespace

BuildResult Merge(const MergeOptions& mo, base::Reporter& reporter) {
  base::Stopwatch sw;
  ENGRAM_CHECK(!mo.parts.empty(), Code::kInvalidArgument,
               "merge needs the partial summaries of every shard");
  ENGRAM_CHECK(!mo.output.empty(), Code::kInvalidArgument, "no output path; give -o TABLE");
  base::RequireParentDir(mo.output);
  const int threads = mo.threads > 0 ? mo.threads : omp_get_max_threads();
  std::vector<int> seen;
  std::vector<PartHeader> headers = ReadPartHeaders(mo.parts, &seen);
  const PartHeader h0 = headers[0];  // a copy: merge rounds replace `headers`
  ENGRAM_CHECK(!mo.partial || h0.mode == "exact", Code::kInvalidArgument,
               "merge --partial combines exact parts; sketch parts (rows x 16 bytes each) are "
               "merged directly: give them all to one 'engramctl merge'");
  if (!mo.partial)
    for (uint32_t k = 0; k < h0.shard_count; ++k)
      ENGRAM_CHECK(seen[k] >= 0, Code::kInvalidArgument,
                   "shard " << k << "/" << h0.shard_count
                            << " is missing; merge needs the parts of all " << h0.shard_count
                            << " shards");
  BuildResult res;
  res.layout = h0.layout;
  for (const auto& h : headers) {
    // Sketch shards each read the whole corpus: count it once.
    res.tokens = h0.mode == "sketch" ? h.tokens : res.tokens + h.tokens;
    res.documents = h0.mode == "sketch" ? h.documents : res.documents + h.documents;
  }
  if (mo.partial) {
    WritePartialMerge(mo.parts, headers, mo.output);
    res.seconds = sw.Seconds();
    return res;
  }
  // Bounded memory: more exact parts than --memory holds open are merged in rounds of at most
  // `fan_in` into temporary parts (removed when the merge ends, even on failure).
  const uint64_t memory = mo.memory_bytes ? mo.memory_bytes : DefaultBuildMemory();
  const size_t fan_in = std::max<size_t>(2, memory / kMergeBytesPerPart);
  std::vector<std::string> parts = mo.parts;
  struct TempParts {
    std::vector<std::string> paths;
    ~TempParts() {
      for (const auto& p : paths) ::unlink(p.c_str());
    }
  } temps;
  const std::string temp_dir = mo.temp_dir.empty() ? base::DirName(mo.output) : mo.temp_dir;
  int rounds = 0;
  while (h0.mode == "exact" && parts.size() > fan_in) {
    ++rounds;
    std::vector<std::string> next;
    std::vector<PartHeader> next_headers;
    for (size_t g = 0; g < parts.size(); g += fan_in) {
      const size_t e = std::min(parts.size(), g + fan_in);
      if (e - g == 1) {
        next.push_back(parts[g]);
        next_headers.push_back(headers[g]);
        continue;
      }
      std::vector<std::string> group(parts.begin() + g, parts.begin() + e);
      std::vector<PartHeader> gh(headers.begin() + g, headers.begin() + e);
      std::string tmp = temp_dir + "/engram-merge." + std::to_string(::getpid()) + "." +
                        std::to_string(temps.paths.size()) + ".part";
      temps.paths.push_back(tmp);
      next_headers.push_back(WritePartialMerge(group, gh, tmp));
      next.push_back(tmp);
      reporter.Progress("merge rounds", g + fan_in, parts.size(), "parts");
    }
    reporter.ProgressDone("merge rounds");
    reporter.Log(base::LogLevel::kInfo,
                 "merge round " + std::to_string(rounds) + ": " + std::to_string(parts.size()) +
                     " parts -> " + std::to_string(next.size()) + " (at most " +
                     std::to_string(fan_in) + " open at once within --memory " +
                     base::FormatBytes(memory) + ")");
    parts = std::move(next);
    headers = std::move(next_headers);
  }
  res.merge_rounds = rounds;
  BuildOptions o;
  ApplyOptionsJson(h0.options, &o);
  o.command_line = mo.command_line;
  const format::Layout& layout = h0.layout;
  const format::WriterOptions wo = WriterOptionsFor(o, threads);
  res.plan = format::PlanSizes(layout, wo);
  format::TableWriter writer(mo.output, layout, wo);
  OwnerArrays oa{writer.tags(), writer.stats(), {}};
  if (!oa.stats) oa.own.assign(layout.total_rows, 0);
  if (h0.mode == "exact") {
    std::vector<std::unique_ptr<ZstdReader>> readers;
    std::vector<ZstdReader*> rs;
    for (const auto& p : parts) {
      readers.push_back(OpenPartBody(p));
      rs.push_back(readers.back().get());
    }
    OwnerAssigner assign(layout, &oa, threads);
    for (uint32_t n = hash::kMinOrder; n <= layout.spec.max_order; ++n) {
      assign.BeginOrder(n);
      MergePartStreams(rs, n, [&](const uint32_t* ids, uint64_t count) { assign.Add(ids, count); });
    }
    assign.Flush();
    res.ngrams_distinct = assign.distinct();
  } else {
    SketchOwners sk(layout, threads);
    for (const auto& p : parts) sk.ReadCells(*OpenPartBody(p));  // one open at a time
    sk.Finish(&oa);
  }
  std::string prov = "{\"creator\":" + base::JsonString(kVersionString) +
                     ",\"command\":" + base::JsonString(mo.command_line) +
                     ",\"created_unix\":" + std::to_string(base::UnixNow()) +
                     ",\"owner_mode\":" + base::JsonString(o.owners) +
                     ",\"tokens\":" + std::to_string(res.tokens) +
                     ",\"documents\":" + std::to_string(res.documents) +
                     ",\"merged_parts\":" + std::to_string(mo.parts.size()) + "}";
  FinishTable(writer, layout, o, prov, threads, &res, reporter);
  res.seconds = sw.Seconds();
  return res;
}

std::string DescribePlan(const BuildResult& r, const BuildOptions& o) {
  std::ostringstream os;
  const format::Layout& l = r.layout;
  os << "layout:      " << hash::AddressingName(l.spec.mode) << " addressing, layers [";
  for (size_t i = 0; i < l.spec.layer_ids.size(); ++i) os << (i ? ", " : "") << l.spec.layer_ids[i];
  os << "], orders 2.." << l.spec.max_order << ", " << l.spec.n_heads << " heads, " << l.total_rows
     << " rows x " << l.row_dim << " " << base::DTypeName(l.dtype) << "\n";
  os << "file size:   " << base::FormatBytes(r.plan.file_size) << " (rows "
     << base::FormatBytes(r.plan.rows_bytes) << ", scales "
     << base::FormatBytes(r.plan.scales_bytes) << ", tags " << base::FormatBytes(r.plan.tags_bytes)
     << ", stats " << base::FormatBytes(r.plan.stats_bytes) << ", checksums "
     << base::FormatBytes(r.plan.sums_bytes) << ")\n";
  if (o.shard_count > 1) {
    os << "shard:       " << o.shard_index << "/" << o.shard_count << " ("
       << (o.owners == "exact" ? "about 1/" + std::to_string(o.shard_count) + " of the input"
                               : std::string("the whole input, 1/") +
                                     std::to_string(o.shard_count) + " of the sub-tables")
       << ")\n";
    os << "RAM needed:  up to " << base::FormatBytes(r.ram_estimate) << " per shard"
       << (o.owners == "exact" ? " (n-gram counts within --memory)" : "") << "\n";
    os << "temp disk:   " << base::FormatBytes(r.temp_estimate) << " per shard (spill runs)\n";
    os << "part file:   up to " << base::FormatBytes(r.part_estimate) << " per shard ("
       << (o.output.empty() ? std::string("OUTPUT") : o.output) << ")\n";
    os << "merge:       RAM up to " << base::FormatBytes(r.merge_ram_estimate) << ", writes "
       << base::FormatBytes(r.plan.file_size) << "; the parts need up to "
       << base::FormatBytes(r.part_estimate * o.shard_count) << " of shared disk\n";
    os << "slurm:       #SBATCH --mem=" << (r.ram_estimate + (1ull << 30) - 1) / (1ull << 30)
       << "G per shard task; --mem=" << (r.merge_ram_estimate + (1ull << 30) - 1) / (1ull << 30)
       << "G for the merge job\n";
    return os.str();
  }
  os << "RAM needed:  up to " << base::FormatBytes(r.ram_estimate)
     << " (n-gram counts, bounded by the number of distinct n-grams)\n";
  os << "temp disk:   " << base::FormatBytes(r.temp_estimate + r.plan.file_size)
     << " (the output is written to " << (o.output.empty() ? std::string("OUTPUT") : o.output)
     << ".tmp.PID and renamed)\n";
  return os.str();
}

}  // namespace engram::builder

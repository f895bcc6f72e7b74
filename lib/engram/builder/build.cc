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
#include "engram/builder/exact_counter.h"
#include "engram/builder/finish.h"
#include "engram/builder/ngram_counter.h"
#include "engram/builder/part.h"
#include "engram/builder/sketch_owners.h"
#include "engram/builder/token_stream.h"
#include "engram/builder/zstd_stream.h"
#include "engram/format/safetensors.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

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
    // A shard keeps no table in memory; a whole build chooses owners in 16 bytes a row, in
    // passes over the sub-tables when they do not fit half of --memory.
    res.ram_estimate = std::min(need, memory) +
                       (sharded ? 0 : std::min(layout.total_rows * 16, OwnerCellBudget(memory))) +
                       (128ull << 20);
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
    // merge: the owner cells (exact: in passes within half of --memory, as a build chooses them;
    // sketch: 16 bytes a row), plus the parts open at once.
    const uint64_t cells = layout.total_rows * 16;
    res.merge_ram_estimate =
        (o.owners == "exact" ? std::min(cells, OwnerCellBudget(memory)) : cells) +
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
    res.ngrams_distinct = exact->AssignOwners(
        layout, &oa, OwnerCellBudget(memory), [&](uint64_t done, uint64_t total) {
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

// Build: resolve layout, stream the corpus, count n-grams, choose owners, fill rows, write.
#include "engram/table/build.h"

#include <omp.h>

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
#include "engram/hash/ngram_hash.h"
#include "engram/table/ngram_counter.h"
#include "engram/table/safetensors.h"
#include "engram/table/token_stream.h"

namespace engram::table {

namespace {

constexpr const char* kVersionString = "engramctl 0.1.0";

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Feeds every n-gram (orders 2..N) of a block into the counters, carrying history across blocks
// and resetting it to pad at document separators.
class NgramFeeder {
 public:
  NgramFeeder(const hash::AddressSpec& spec, std::vector<NgramCounter>* counters)
      : spec_(spec), counters_(counters), window_(spec.max_order, spec.pad_id) {}
  void Feed(std::span<const uint32_t> block) {
    const uint32_t N = spec_.max_order;
    uint32_t* w = window_.data();
    for (uint32_t id : block) {
      if (id == kDocSeparator) {
        std::fill(window_.begin(), window_.end(), spec_.pad_id);
        continue;
      }
      std::memmove(w, w + 1, (N - 1) * 4);
      w[N - 1] = id;
      for (uint32_t n = hash::kMinOrder; n <= N; ++n)
        (*counters_)[n - hash::kMinOrder].Add(w + N - n);
    }
  }

 private:
  const hash::AddressSpec& spec_;
  std::vector<NgramCounter>* counters_;
  std::vector<uint32_t> window_;
};

struct OwnerArrays {
  uint32_t* tags;
  uint8_t* stats;             // may be null
  std::vector<uint32_t> own;  // owner counts when there is no stats section
  uint32_t OwnerCount(uint64_t r) const {
    return stats ? base::LoadLE<uint32_t>(stats + r * kStatsRowSize) : own[r];
  }
};

inline uint32_t Sat32(uint64_t v) {
  return v > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<uint32_t>(v);
}

// Applies every distinct n-gram of `counter` to the owner cells of all its sub-tables. Parallel
// over sub-tables (each owns a disjoint row range), so no two threads touch one row.
void AssignOwners(const Layout& l, const NgramCounter& counter, OwnerArrays* oa, int threads) {
  const uint32_t n = counter.order();
  const hash::AddressSpec& s = l.spec;
  const int64_t jobs = static_cast<int64_t>(s.n_layers() * s.n_heads);
  const size_t cap = counter.capacity();
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t job = 0; job < jobs; ++job) {
    try {
      const size_t li = static_cast<size_t>(job) / s.n_heads;
      const uint32_t h = static_cast<uint32_t>(job % s.n_heads);
      const size_t sub = s.SubIndex(li, n, h);
      const uint64_t base_row = l.row_offsets[sub];
      for (size_t slot = 0; slot < cap; ++slot) {
        uint64_t c = counter.CountAt(slot);
        if (c == 0) continue;
        const uint32_t* ids = counter.IdsAt(slot);
        const uint64_t row = base_row + hash::BucketOf(s, li, n, h, ids);
        const uint32_t tag = hash::OwnerTag(ids, n, l.owner_tag_seed);
        const uint32_t cc = Sat32(c);
        uint32_t cur = oa->OwnerCount(row);
        uint32_t cur_tag = oa->tags[row];
        if (cc > cur || (cc == cur && tag < cur_tag) || cur_tag == hash::kNoOwner) {
          oa->tags[row] = tag;
          if (oa->stats)
            base::StoreLE<uint32_t>(oa->stats + row * kStatsRowSize, cc);
          else
            oa->own[row] = cc;
        }
        if (oa->stats) {
          uint8_t* st = oa->stats + row * kStatsRowSize;
          base::StoreLE<uint32_t>(st + 4, Sat32(uint64_t{base::LoadLE<uint32_t>(st + 4)} + c));
          base::StoreLE<uint32_t>(st + 8, Sat32(uint64_t{base::LoadLE<uint32_t>(st + 8)} + 1));
        }
      }
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

StDType StorageStDType(base::DType t) {
  switch (t) {
    case base::DType::kF32:
      return StDType::kF32;
    case base::DType::kBF16:
      return StDType::kBF16;
    case base::DType::kF16:
      return StDType::kF16;
    case base::DType::kF8E4M3:
      return StDType::kF8E4M3;
  }
  return StDType::kF32;
}

void CopyValues(const BuildOptions& o, const Layout& l, uint8_t* rows, uint8_t* scales,
                base::Reporter& reporter) {
  auto ckpt = Checkpoint::Open(o.values_path);
  auto [file, t] = ckpt->Get(o.values_tensor);
  const uint64_t want = l.total_rows * l.row_dim;
  std::string shape;
  for (size_t i = 0; i < t->shape.size(); ++i)
    shape += (i ? "x" : "") + std::to_string(t->shape[i]);
  ENGRAM_CHECK(t->numel() == want, Code::kInvalidArgument,
               "tensor \"" << o.values_tensor << "\" has shape [" << shape << "] (" << t->numel()
                           << " values), but the table needs " << l.total_rows << " rows x "
                           << l.row_dim << " values = " << want
                           << "; check the layout flags or the tensor name");
  ENGRAM_CHECK(t->dtype == StorageStDType(l.dtype), Code::kInvalidArgument,
               "tensor \"" << o.values_tensor << "\" is " << StDTypeName(t->dtype)
                           << " but the table stores " << base::DTypeName(l.dtype)
                           << "; pass --dtype matching the tensor (rows are copied bit-exact)");
  auto data = file->Data(*t);
  std::memcpy(rows, data.data(), data.size());
  if (l.dtype == base::DType::kF8E4M3) {
    ENGRAM_CHECK(!o.scales_tensor.empty(), Code::kInvalidArgument,
                 "fp8 values need their e8m0 scales: give --scale-tensor NAME");
    auto [sf, st] = ckpt->Get(o.scales_tensor);
    ENGRAM_CHECK(st->numel() == l.total_rows * l.scale_stride(), Code::kInvalidArgument,
                 "scale tensor \"" << o.scales_tensor << "\" has " << st->numel()
                                   << " values, the table needs " << l.total_rows * l.scale_stride()
                                   << " (one per 32 values)");
    ENGRAM_CHECK(st->dtype == StDType::kF8E8M0 || st->dtype == StDType::kU8, Code::kInvalidArgument,
                 "scale tensor \"" << o.scales_tensor << "\" is " << StDTypeName(st->dtype)
                                   << "; e8m0 scales are F8_E8M0 or U8");
    auto sd = sf->Data(*st);
    std::memcpy(scales, sd.data(), sd.size());
  } else {
    ENGRAM_CHECK(o.scales_tensor.empty(), Code::kInvalidArgument,
                 "--scale-tensor applies to fp8 tables only");
  }
  reporter.Log(base::LogLevel::kInfo, "values: copied " + std::to_string(l.total_rows) +
                                          " rows bit-exact from " + o.values_path + " [" +
                                          o.values_tensor + "]");
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

void FillNormal(const Layout& l, uint64_t seed, double std_dev, uint8_t* rows, uint8_t* scales,
                int threads) {
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
  ENGRAM_CHECK(o.owners == "exact", Code::kInvalidArgument,
               "--owners " << o.owners << ": use exact");
  ENGRAM_CHECK(o.init_std > 0 && std::isfinite(o.init_std), Code::kInvalidArgument,
               "--init-std must be > 0");
  ENGRAM_CHECK(o.corpus_files.empty() || !o.layout.tokenizer_path.empty(), Code::kInvalidArgument,
               "--corpus needs a tokenizer: give --tokenizer tokenizer.json or [model] tokenizer "
               "in the config");
  Layout layout = ResolveLayout(o.layout);
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  WriterOptions wo;
  wo.chunk_log2 = o.chunk_log2;
  wo.with_stats = o.with_stats;
  wo.threads = threads;
  res.plan = PlanSizes(layout, wo);

  TokenStreamOptions so;
  so.token_files = o.token_files;
  so.corpus_files = o.corpus_files;
  so.tokenizer_path = o.layout.tokenizer_path;
  so.doc_per_file = o.doc_per_file;
  so.ids_are_canonical = o.ids_are_canonical;
  so.threads = threads;
  const uint64_t input_bytes = InputBytes(so);
  // Upper bound of distinct n-grams: every input token starts one n-gram per order.
  uint64_t approx_tokens = input_bytes / 4;
  uint64_t counter_bytes = 0;
  for (uint32_t n = hash::kMinOrder; n <= layout.spec.max_order; ++n)
    counter_bytes += approx_tokens * NgramCounter::BytesPerEntry(n);
  res.ram_estimate = counter_bytes + (o.with_stats ? 0 : layout.total_rows * 4) + (64ull << 20);
  res.temp_estimate = 0;
  res.layout = layout;
  if (o.dry_run) {
    res.dry_run = true;
    res.seconds = sw.Seconds();
    return res;
  }
  TableWriter writer(o.output, layout, wo);
  std::vector<NgramCounter> counters;
  for (uint32_t n = hash::kMinOrder; n <= layout.spec.max_order; ++n) counters.emplace_back(n);
  NgramFeeder feeder(layout.spec, &counters);
  TokenStreamStats st;
  if (!o.token_files.empty() || !o.corpus_files.empty()) {
    st = StreamTokens(
        so, layout, [&](std::span<const uint32_t> block) { feeder.Feed(block); }, reporter);
    if (st.replaced_utf8)
      reporter.Log(base::LogLevel::kNote,
                   "corpus: " + std::to_string(st.replaced_utf8) +
                       " invalid UTF-8 sequences were replaced with U+FFFD before tokenizing");
  }
  res.tokens = st.tokens;
  res.documents = st.documents;

  OwnerArrays oa{writer.tags(), writer.stats(), {}};
  if (!oa.stats) oa.own.assign(layout.total_rows, 0);
  for (const auto& c : counters) {
    res.ngrams_distinct += c.size();
    reporter.Progress("assign owners", static_cast<uint64_t>(&c - counters.data()), counters.size(),
                      "orders");
    AssignOwners(layout, c, &oa, threads);
  }
  reporter.ProgressDone("assign owners");
  counters.clear();
  for (uint64_t r = 0; r < layout.total_rows; ++r) res.owned_rows += oa.tags[r] != hash::kNoOwner;

  if (!o.values_path.empty())
    CopyValues(o, layout, writer.rows(), writer.scales(), reporter);
  else if (o.init == "normal")
    FillNormal(layout, o.init_seed, o.init_std, writer.rows(), writer.scales(), threads);
  else if (layout.dtype == base::DType::kF8E4M3)
    std::memset(writer.scales(), 127, layout.total_rows * layout.scale_stride());

  uint64_t created = base::UnixNow();
  writer.SetProvenance(Provenance(o, st, created));
  writer.Commit(reporter);
  res.seconds = sw.Seconds();
  return res;
}

std::string DescribePlan(const BuildResult& r, const BuildOptions& o) {
  std::ostringstream os;
  const Layout& l = r.layout;
  os << "layout:      " << hash::AddressingName(l.spec.mode) << " addressing, layers [";
  for (size_t i = 0; i < l.spec.layer_ids.size(); ++i) os << (i ? ", " : "") << l.spec.layer_ids[i];
  os << "], orders 2.." << l.spec.max_order << ", " << l.spec.n_heads << " heads, " << l.total_rows
     << " rows x " << l.row_dim << " " << base::DTypeName(l.dtype) << "\n";
  os << "file size:   " << base::FormatBytes(r.plan.file_size) << " (rows "
     << base::FormatBytes(r.plan.rows_bytes) << ", scales "
     << base::FormatBytes(r.plan.scales_bytes) << ", tags " << base::FormatBytes(r.plan.tags_bytes)
     << ", stats " << base::FormatBytes(r.plan.stats_bytes) << ", checksums "
     << base::FormatBytes(r.plan.sums_bytes) << ")\n";
  os << "RAM needed:  up to " << base::FormatBytes(r.ram_estimate)
     << " (n-gram counts, bounded by the number of distinct n-grams)\n";
  os << "temp disk:   " << base::FormatBytes(r.temp_estimate + r.plan.file_size)
     << " (the output is written to " << (o.output.empty() ? std::string("OUTPUT") : o.output)
     << ".tmp.PID and renamed)\n";
  return os.str();
}

}  // namespace engram::table

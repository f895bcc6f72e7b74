// Merge: part files of a sharded build (or of partial merges) into one table, or into one
// partial part (merge --partial): headers checked, exact counts summed, sketch cells joined.
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
#include "engram/builder/build.h"
#include "engram/builder/exact_counter.h"
#include "engram/builder/finish.h"
#include "engram/builder/ngram_counter.h"
#include "engram/builder/owner_cells.h"
#include "engram/builder/part.h"
#include "engram/builder/sketch_owners.h"
#include "engram/builder/token_stream.h"
#include "engram/builder/zstd_stream.h"
#include "engram/format/safetensors.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

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
    // Owners land in the table's TAGS and STATS, 16 bytes a row. When those exceed half of
    // --memory they are chosen in passes over consecutive sub-tables, each reading the parts
    // again, and a pass's pages are given back when it is done (the page cache keeps them).
    const std::vector<OwnerPass> passes = PlanOwnerPasses(layout, OwnerCellBudget(memory));
    uint64_t distinct = 0;
    for (size_t pi = 0; pi < passes.size(); ++pi) {
      const OwnerPass& pass = passes[pi];
      std::vector<std::unique_ptr<ZstdReader>> readers;
      std::vector<ZstdReader*> rs;
      for (const auto& p : parts) {
        readers.push_back(OpenPartBody(p));
        rs.push_back(readers.back().get());
      }
      OwnerAssigner assign(layout, &oa, threads, &pass);
      for (uint32_t n = hash::kMinOrder; n <= layout.spec.max_order; ++n) {
        // Orders come one after another in each part: one this pass does not need is read past.
        const bool use = pass.HasOrder(layout, n), count = pass.CountsOrder(layout, n);
        assign.BeginOrder(n);
        MergePartStreams(rs, n, [&](const uint32_t* ids, uint64_t c) {
          if (!use) return;
          distinct += count;
          assign.Add(ids, c);
        });
      }
      assign.Flush();
      if (passes.size() > 1) {
        TableCells{&oa}.Release(pass.first_row, pass.end_row);
        reporter.Progress("owner passes", pi + 1, passes.size(), "passes");
      }
    }
    if (passes.size() > 1) reporter.ProgressDone("owner passes");
    res.ngrams_distinct = distinct;
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

}  // namespace engram::builder

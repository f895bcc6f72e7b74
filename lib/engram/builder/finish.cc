// Writer options, part options, provenance and the last steps of writing a table.
#include "engram/builder/finish.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "engram/base/file.h"
#include "engram/builder/values.h"
#include "engram/format/format.h"
#include "engram/hash/ngram_hash.h"

namespace engram::builder {

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

format::WriterOptions WriterOptionsFor(const BuildOptions& o, int threads) {
  format::WriterOptions wo;
  wo.chunk_log2 = o.chunk_log2;
  wo.with_stats = o.with_stats;
  wo.sketch_owners = o.owners == "sketch";
  wo.threads = threads;
  return wo;
}

void FinishTable(format::TableWriter& writer, const format::Layout& layout, const BuildOptions& o,
                 const std::string& provenance, int threads, BuildResult* res,
                 base::Reporter& reporter) {
  // Passes over the mapping go a block of rows at a time and unmap what they went through: a
  // table larger than memory is never the process's resident memory (the page cache keeps the
  // pages).
  constexpr uint64_t kBlock = uint64_t{1} << 20;
  auto blocks = [&](const std::function<void(uint64_t r0, uint64_t r1)>& f) {
    for (uint64_t r0 = 0; r0 < layout.total_rows; r0 += kBlock)
      f(r0, std::min(layout.total_rows, r0 + kBlock));
  };
  blocks([&](uint64_t r0, uint64_t r1) {
    for (uint64_t r = r0; r < r1; ++r) res->owned_rows += writer.tags()[r] != hash::kNoOwner;
    base::ReleaseMappedPages(writer.tags() + r0, (r1 - r0) * 4);
  });
  if (!o.values_path.empty()) {
    CopyValues(o, layout, writer.rows(), writer.scales(), reporter);
  } else if (o.init == "normal") {
    FillNormal(layout, o.init_seed, o.init_std, writer.rows(), writer.scales(), threads);
  } else if (layout.dtype == base::DType::kF8E4M3) {
    const uint64_t ss = layout.scale_stride();
    blocks([&](uint64_t r0, uint64_t r1) {
      std::memset(writer.scales() + r0 * ss, 127, (r1 - r0) * ss);
      base::ReleaseMappedPages(writer.scales() + r0 * ss, (r1 - r0) * ss);
    });
  }
  // What the table scores on its own corpus (owner counts / occurrences over every sub-table):
  // run and serve explain a request's hit rate against it.
  std::string prov = provenance;
  double share = -1;
  if (writer.stats()) {
    uint64_t owner = 0, total = 0;
    blocks([&](uint64_t r0, uint64_t r1) {
      const uint8_t* st = writer.stats() + r0 * format::kStatsRowSize;
      format::AddOwnerCounts({st, (r1 - r0) * format::kStatsRowSize}, &owner, &total);
      base::ReleaseMappedPages(st, (r1 - r0) * format::kStatsRowSize);
    });
    if (total) share = static_cast<double>(owner) / static_cast<double>(total);
  }
  if (share >= 0 && !prov.empty() && prov.back() == '}') {
    char rate[64];
    std::snprintf(rate, sizeof rate, ",\"corpus_hit_rate\":%.6f}", share);
    prov.pop_back();
    prov += rate;
  }
  writer.SetProvenance(prov);
  writer.Commit(reporter);
}

}  // namespace engram::builder

// The quality gate: RunCheck drives the model module in perplexity mode with a compare table.
#include "quality_check.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/module_status.h"
#include "engram/format/view.h"
#include "engram/model/run.h"
#include "engram/table/hotset.h"
#include "reporter.h"

namespace engramctl {

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

CheckReport RunCheck(const std::string& config_path, const std::string& source,
                     const std::string& converted, const std::string& corpus, uint64_t max_tokens,
                     int threads, const engram::config::Config& cfg, engram::base::Reporter& rep) {
  CheckReport c;
  engram::format::ViewOptions vo;
  vo.deterministic_addressing = false;
  auto src = engram::format::TableView::Open(source, vo);
  auto out = engram::format::TableView::Open(converted, vo);
  // The rows the corpus reads, and their error.
  const std::vector<std::vector<uint32_t>> docs =
      ReadDocuments("", corpus, src->layout(), TokenizerFromConfig(cfg), max_tokens);
  const std::vector<uint64_t> trace = engram::table::RowTrace(src->layout(), docs);
  c.read_rows = engram::table::CompareRows(*src, *out, trace);
  // The model, both tables, the same documents (as text: the run tokenizes them again).
  engram::model::RunOptions o;
  o.config_path = config_path;
  o.table_path = source;
  o.compare_table_path = converted;
  o.perplexity = true;
  o.read_journal = true;  // the source as its readers see it, journal included
  o.threads = threads;
  // The documents the row trace read (whole documents up to max_tokens): the first non-empty lines.
  const size_t n_docs = static_cast<size_t>(
      std::count_if(docs.begin(), docs.end(), [](const auto& d) { return !d.empty(); }));
  engram::base::ForEachLine(corpus, 64u << 20, [&](size_t, std::string_view line, bool) {
    if (o.prompts.size() < n_docs && !line.empty()) o.prompts.emplace_back(line);
  });
  ENGRAM_CHECK(!o.prompts.empty(), engram::Code::kInvalidArgument,
               corpus << ": no text to check with (one document per line)");
  engram::model::RunResult r;
  WarningsOnly quiet(rep);
  engram::base::CallModule(engram::model::LoadModelPlugin(), &o, &quiet, &r);
  const auto& cmp = r.compare;
  ENGRAM_CHECK(cmp.tokens > 0, engram::Code::kInvalidArgument,
               corpus << ": no position was scored (documents need at least two tokens)");
  c.documents = o.prompts.size();
  c.tokens = cmp.tokens;
  std::vector<float> kl = cmp.kl;
  double sum = 0;
  for (float v : kl) sum += v;
  c.mean_kl = sum / static_cast<double>(kl.size());
  std::sort(kl.begin(), kl.end());
  c.p99_kl =
      kl[std::min(kl.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(kl.size())))];
  c.max_kl = kl.back();
  c.top1 = static_cast<double>(cmp.top1_agree) / static_cast<double>(cmp.tokens);
  c.ppl_source = std::exp(cmp.nll / static_cast<double>(cmp.tokens));
  c.ppl_converted = std::exp(cmp.compare_nll / static_cast<double>(cmp.tokens));
  c.ppl_increase_pct = 100.0 * (c.ppl_converted / c.ppl_source - 1.0);
  return c;
}

void AddCheckFlags(CLI::App* s, CheckFlags* f, const std::string& consequence) {
  s->add_option("--check-corpus", f->corpus,
                "Text, one document per line: the model (--config) scores it with both tables; "
                "reports KL, top-1 agreement, perplexity change and row error");
  s->add_option("--check-max-tokens", f->max_tokens,
                "Check with the first documents of the corpus, about N tokens (default: all)");
  s->add_option("--max-kl", f->max_kl, consequence + " when the mean KL per token exceeds X nats");
  s->add_option("--max-ppl-increase", f->max_ppl_increase,
                consequence + " when perplexity rises by more than PCT percent");
}

std::string CheckReport::Line() const {
  return "check: " + std::to_string(tokens) + " tokens in " + std::to_string(documents) +
         (documents == 1 ? " document" : " documents") + ": KL mean " + Fmt("%.3g", mean_kl) +
         ", p99 " + Fmt("%.3g", p99_kl) + ", max " + Fmt("%.3g", max_kl) +
         " nats; top-1 agreement " + Fmt("%.2f", 100 * top1) + "%; perplexity " +
         Fmt("%.3f", ppl_source) + " -> " + Fmt("%.3f", ppl_converted) + " (" +
         Fmt("%+.3f", ppl_increase_pct) + "%)";
}

std::string CheckReport::Exceeds(double max_kl_bound, double max_ppl) const {
  if (max_kl_bound >= 0 && mean_kl > max_kl_bound)
    return "mean KL " + Fmt("%.3g", mean_kl) + " exceeds --max-kl " + Fmt("%g", max_kl_bound);
  if (max_ppl >= 0 && ppl_increase_pct > max_ppl)
    return "perplexity rises " + Fmt("%.3f", ppl_increase_pct) +
           "%, more than --max-ppl-increase " + Fmt("%g", max_ppl) + "%";
  return {};
}

}  // namespace engramctl

// `engramctl hotset`: the rows a corpus reads, replayed through an LRU row cache of every size
// (exact, from stack distances): how much of the table must be resident for a hit rate.
#include <fcntl.h>

#include <CLI/CLI.hpp>
#include <cstring>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/format/reader.h"
#include "engram/table/hotset.h"
#include "engram/tokenizer/tokenizer.h"

namespace engramctl {

void AddHotsetCommand(CLI::App& app) {
  struct Flags {
    LayoutFlags layout;
    std::string table, config_path, corpus, tokens, svg;
    uint64_t max_tokens = 0;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "hotset",
      "How much of a table must be resident: the rows a corpus reads, through an LRU row cache "
      "of every size (exact); distinct rows, first touches, the sizes for 90/95/99% hits");
  s->add_option("table", f->table,
                "Table file (its layout; default: [engram.table] path of "
                "--config; without one, the layout flags)");
  s->add_option("--config", f->config_path, "config.toml: layout, tokenizer, table path");
  s->add_option("--corpus", f->corpus, "Text, one document per line (needs the tokenizer)");
  s->add_option("--tokens", f->tokens,
                "Canonical ids, u32 little-endian, 0xFFFFFFFF between documents");
  s->add_option("--max-tokens", f->max_tokens, "Read at most N tokens of the input");
  s->add_option("--svg", f->svg, "Also draw the curve (bytes on a log axis, hit rate) as SVG");
  s->add_flag("--json", f->json,
              "Print {lookups, distinct_rows, first_touch, curve: [{rows, bytes, hit_rate}], "
              "rows_for}");
  AddLayoutFlags(s, &f->layout);
  s->callback([f] {
    StderrReporter rep;
    ENGRAM_CHECK(f->corpus.empty() != f->tokens.empty(), engram::Code::kInvalidArgument,
                 "give the requests to replay: --corpus FILE (text) or --tokens FILE (u32 ids)");
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    engram::format::LayoutRequest req;
    std::string tokenizer;
    if (cfg) {
      req.config = &*cfg;
      tokenizer = TokenizerFromConfig(*cfg);
      if (f->table.empty() && !cfg->table.path.empty()) f->table = cfg->table.path;
    }
    if (!f->layout.tokenizer.empty()) tokenizer = f->layout.tokenizer;
    engram::format::Layout layout;
    if (!f->table.empty()) {
      layout = engram::format::Reader::Open(f->table)->layout();
    } else {
      req.tokenizer_path = tokenizer;
      ApplyLayoutFlags(f->layout, &req);
      layout = engram::format::ResolveLayout(req);
    }
    const auto docs = ReadDocuments(f->tokens, f->corpus, layout, tokenizer,
                                    f->max_tokens ? f->max_tokens : UINT64_MAX);
    const std::vector<uint64_t> trace = engram::table::RowTrace(layout, docs);
    ENGRAM_CHECK(!trace.empty(), engram::Code::kInvalidArgument,
                 "the input holds no tokens: nothing to replay");
    const auto r = engram::table::Hotset(trace, layout.row_stride() + layout.scale_stride() + 4,
                                         layout.total_rows);
    if (!f->svg.empty()) {
      auto base = [](const std::string& p) { return p.substr(p.find_last_of('/') + 1); };
      const std::string svg =
          r.ToSvg("LRU row cache hit rate: " + base(f->corpus.empty() ? f->tokens : f->corpus) +
                  " on " + (f->table.empty() ? std::string("the layout") : base(f->table)));
      engram::base::UniqueFd out =
          engram::base::OpenFile(f->svg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      engram::base::PwriteFull(out.get(), svg.data(), svg.size(), 0, f->svg);
    }
    PrintStdout(f->json ? r.ToJson() : r.ToText());
  });
}

}  // namespace engramctl

// `engramctl tokenize`: text -> token ids with a HF tokenizer.json (stdout, --json, or a u32 file).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <iterator>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/builder/build.h"
#include "engram/format/resolve.h"
#include "engram/tokenizer/tokenizer.h"

namespace engramctl {

namespace {
// u32 ids to FILE (temp file + rename) or, for "-", to stdout.
void WriteU32(const std::string& path, const std::vector<uint32_t>& v) {
  if (path == "-") {
    std::fwrite(v.data(), 4, v.size(), stdout);
    std::fflush(stdout);
    return;
  }
  engram::base::TempFile tf(path);
  engram::base::PwriteFull(tf.fd(), v.data(), v.size() * 4, 0, tf.temp_path());
  tf.Commit();
}
}  // namespace

void AddTokenizeCommand(CLI::App& app) {
  struct Flags {
    std::string tokenizer, text, file, out, config_path;
    bool json = false, special = false, lines = false, decode = false, canonical = false,
         info = false, map = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "tokenize", "Turn text into token ids (or ids back into text with --decode)");
  s->add_option("text", f->text,
                "Text to tokenize (or ids with --decode); default: -f FILE or stdin");
  s->add_option("--tokenizer", f->tokenizer, "HF tokenizer.json (default: from --config)");
  s->add_option("--config", f->config_path, "config.toml naming the tokenizer in [model]");
  s->add_option("-f,--file", f->file, "Read the text from FILE ('-' = stdin)");
  s->add_option("-o,--output", f->out,
                "Write little-endian u32 ids to FILE (the format 'build --tokens' reads)");
  s->add_flag(
      "--lines", f->lines,
      "Each input line is a document: ids separated by 0xFFFFFFFF in -o, one line each on stdout");
  s->add_flag("--add-special-tokens", f->special,
              "Apply the tokenizer's post-processor template (e.g. BOS)");
  s->add_flag("--canonical", f->canonical,
              "Print canonical ids (the table's compressed vocabulary) instead");
  s->add_flag("--decode", f->decode, "Decode space-separated ids back to text");
  s->add_flag("--canonical-map", f->map,
              "Print (or with -o write as u32) the canonical id of every token id");
  s->add_flag("--info", f->info,
              "Print the tokenizer's vocabulary size, canonical vocabulary and fingerprint");
  s->add_flag("--json", f->json,
              "Print JSON: ids, tokens (vocabulary strings), text (what each token reads as) and "
              "(with --canonical) canonical ids");
  s->callback([f] {
    StderrReporter rep;
    auto cfg = LoadConfigIfAny(f->config_path, rep);
    if (f->tokenizer.empty() && cfg) f->tokenizer = TokenizerFromConfig(*cfg);
    ENGRAM_CHECK(
        !f->tokenizer.empty(), engram::Code::kInvalidArgument,
        "no tokenizer; give --tokenizer tokenizer.json or --config with [model] tokenizer");
    auto tok = engram::tokenizer::Tokenizer::Load(f->tokenizer);
    if (f->info) {
      const auto& ci = engram::format::CanonicalInfoFor(f->tokenizer);
      char fp[24];
      std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(ci.fingerprint));
      PrintStdout(f->json
                      ? "{\"vocab_size\":" + std::to_string(tok->vocab_size()) +
                            ",\"canonical_vocab\":" + std::to_string(ci.canonical_vocab) +
                            ",\"fingerprint\":\"" + fp + "\"}"
                      : "vocab_size " + std::to_string(tok->vocab_size()) + "\ncanonical_vocab " +
                            std::to_string(ci.canonical_vocab) + "\nfingerprint " + fp);
      return;
    }
    if (f->map) {
      const auto& m = engram::format::CanonicalInfoFor(f->tokenizer).map;
      if (!f->out.empty()) {
        WriteU32(f->out, m);
        return;
      }
      std::string line;
      for (size_t i = 0; i < m.size(); ++i) line += (i ? " " : "") + std::to_string(m[i]);
      PrintStdout(line);
      return;
    }
    std::string input;
    if (!f->text.empty()) {
      input = f->text;
    } else if (!f->file.empty() && f->file != "-") {
      input = engram::base::ReadFileToString(f->file, 1ull << 34);
    } else {
      input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    if (f->decode) {
      std::vector<uint32_t> ids;
      size_t i = 0;
      while (i < input.size()) {
        while (i < input.size() &&
               (input[i] == ' ' || input[i] == ',' || input[i] == '\n' || input[i] == '\t'))
          ++i;
        if (i >= input.size()) break;
        size_t j = i;
        while (j < input.size() && input[j] >= '0' && input[j] <= '9') ++j;
        ENGRAM_CHECK(j > i, engram::Code::kInvalidArgument,
                     "--decode: '" << input.substr(i, 20)
                                   << "' is not a token id; give space-separated decimal ids");
        ids.push_back(static_cast<uint32_t>(std::stoul(input.substr(i, j - i))));
        i = j;
      }
      PrintStdout(tok->Decode(ids, false));
      return;
    }
    std::vector<std::string> docs;
    if (f->lines) {
      size_t start = 0;
      while (start <= input.size()) {
        size_t nl = input.find('\n', start);
        if (nl == std::string::npos) nl = input.size();
        std::string line = input.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) docs.push_back(std::move(line));
        start = nl + 1;
      }
    } else {
      docs.push_back(std::move(input));
    }
    engram::tokenizer::Encoder enc(*tok);
    const std::vector<uint32_t>* canon = nullptr;
    if (f->canonical) canon = &engram::format::CanonicalInfoFor(f->tokenizer).map;
    size_t replaced = 0;
    std::vector<std::vector<uint32_t>> all;
    for (const auto& d : docs) {
      all.push_back(enc.Encode(d, f->special, &replaced));
      if (canon)
        for (auto& id : all.back()) id = (*canon)[id];
    }
    if (replaced)
      rep.Log(engram::base::LogLevel::kNote,
              std::to_string(replaced) +
                  " invalid UTF-8 sequence(s) were replaced with U+FFFD before tokenizing");
    if (!f->out.empty()) {
      std::vector<uint32_t> flat;
      for (size_t d = 0; d < all.size(); ++d) {
        flat.insert(flat.end(), all[d].begin(), all[d].end());
        if (f->lines) flat.push_back(engram::builder::kDocSeparator);
      }
      WriteU32(f->out, flat);
      rep.Log(engram::base::LogLevel::kInfo, "wrote " + std::to_string(flat.size()) + " ids (" +
                                                 std::to_string(docs.size()) + " documents) to " +
                                                 f->out);
      return;
    }
    if (f->json) {
      std::string j = "[";
      for (size_t d = 0; d < all.size(); ++d) {
        j += (d ? "," : "") + std::string("{\"ids\":[");
        for (size_t i = 0; i < all[d].size(); ++i) j += (i ? "," : "") + std::to_string(all[d][i]);
        if (!canon) {
          j += "],\"tokens\":[";
          for (size_t i = 0; i < all[d].size(); ++i)
            j += (i ? "," : "") + engram::base::JsonString(tok->IdToToken(all[d][i]));
          j += "],\"text\":[";
          for (size_t i = 0; i < all[d].size(); ++i)
            j += (i ? "," : "") + engram::base::JsonString(tok->TokenText(all[d][i]));
        }
        j += "]}";
      }
      j += "]";
      PrintStdout(f->lines ? j : j.substr(1, j.size() - 2));
      return;
    }
    std::string out;
    for (const auto& ids : all) {
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
      out += "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace engramctl

// Compares engramctl's tokenizer with the Hugging Face oracle's recorded output (oracle.js):
// identical ids (with and without special tokens), identical decoded text, identical canonical
// map. Prints every mismatch (up to a limit) with its category; exits 1 on any.
//   tokenizer_parity TOKENIZER.json CORPUS.jsonl ORACLE.jsonl [CANON.json]
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/tokenizer/canonical.h"
#include "engram/tokenizer/tokenizer.h"

using namespace engram;

namespace {

std::string B64Decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    if (c == '=') break;
    size_t p = chars.find(c);
    if (p == std::string::npos) continue;
    val = (val << 6) + static_cast<int>(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

std::vector<std::string> Lines(const std::string& path) {
  std::string text = base::ReadFileToString(path, 1ull << 32);
  std::vector<std::string> out;
  for (size_t p = 0, q; p < text.size(); p = q + 1) {
    q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    if (q > p) out.push_back(text.substr(p, q - p));
  }
  return out;
}

std::vector<uint32_t> Ids(const base::Json& a) {
  std::vector<uint32_t> v;
  for (const auto& x : a.items()) v.push_back(static_cast<uint32_t>(*x.as_uint64()));
  return v;
}

std::string Show(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 40; ++i) s += (i ? " " : "") + std::to_string(v[i]);
  if (v.size() > 40) s += " ...";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: tokenizer_parity TOKENIZER.json CORPUS.jsonl ORACLE.jsonl [CANON.json]\n");
    return 2;
  }
  auto tok = tokenizer::Tokenizer::Load(argv[1]);
  auto corpus = Lines(argv[2]);
  auto oracle = Lines(argv[3]);
  if (corpus.size() != oracle.size()) {
    std::fprintf(stderr, "corpus has %zu records, oracle %zu\n", corpus.size(), oracle.size());
    return 1;
  }
  tokenizer::Encoder enc(*tok);
  std::map<std::string, std::pair<int, int>> per_cat;  // category -> (total, failed)
  int failures = 0, shown = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    base::Json c = base::Json::Parse(corpus[i], "corpus");
    base::Json o = base::Json::Parse(oracle[i], "oracle");
    std::string cat = c.Find("cat")->as_string();
    std::string bytes = B64Decode(c.Find("b64")->as_string());
    std::vector<uint32_t> want = Ids(*o.Find("ids")), want_sp = Ids(*o.Find("ids_special"));
    std::vector<uint32_t> got = enc.Encode(bytes, false), got_sp = enc.Encode(bytes, true);
    std::string dec = tok->Decode(want, false), dec_skip = tok->Decode(want, true);
    bool ok = got == want && got_sp == want_sp &&
              dec == B64Decode(o.Find("decoded")->as_string()) &&
              dec_skip == B64Decode(o.Find("decoded_skip")->as_string());
    per_cat[cat].first++;
    if (!ok) {
      per_cat[cat].second++;
      ++failures;
      if (shown++ < 15) {
        std::printf("MISMATCH #%zu [%s] text=%s\n  want %s\n  got  %s\n", i, cat.c_str(),
                    base::JsonString(bytes.substr(0, 200)).c_str(), Show(want).c_str(),
                    Show(got).c_str());
        if (dec != B64Decode(o.Find("decoded")->as_string()))
          std::printf(
              "  decoded differs: want %s got %s\n",
              base::JsonString(B64Decode(o.Find("decoded")->as_string()).substr(0, 200)).c_str(),
              base::JsonString(dec.substr(0, 200)).c_str());
      }
    }
  }
  for (const auto& [cat, v] : per_cat)
    std::printf("%-14s %5d strings, %d mismatches\n", cat.c_str(), v.first, v.second);
  std::printf("total          %5zu strings, %d mismatches\n", corpus.size(), failures);
  if (argc > 4) {
    base::Json m = base::Json::Parse(base::ReadFileToString(argv[4], 1ull << 30), "canon");
    std::vector<uint32_t> want = Ids(m);
    tokenizer::CanonicalMap cm = tokenizer::BuildCanonicalMap(*tok);
    size_t diff = 0;
    for (size_t id = 0; id < std::max(want.size(), cm.map.size()); ++id) {
      bool same = id < want.size() && id < cm.map.size() && want[id] == cm.map[id];
      if (!same && diff++ < 10) {
        uint32_t one[1] = {static_cast<uint32_t>(id)};
        std::printf("CANONICAL MISMATCH id %zu (%s): want %d got %d\n", id,
                    base::JsonString(tok->Decode(one)).c_str(),
                    id < want.size() ? static_cast<int>(want[id]) : -1,
                    id < cm.map.size() ? static_cast<int>(cm.map[id]) : -1);
      }
    }
    std::printf("canonical map: %zu ids -> %u canonical ids, %zu mismatches\n", cm.map.size(),
                cm.canonical_vocab, diff);
    if (diff) ++failures;
  }
  return failures ? 1 : 0;
}

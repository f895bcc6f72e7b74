// Tokenizer pipeline: added-token split, normalize, pre-tokenize, BPE, post-process; decode.
#include "engram/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/hash/checksum.h"
#include "engram/tokenizer/bpe.h"
#include "engram/tokenizer/components.h"
#include "engram/tokenizer/unicode.h"

namespace engram::tokenizer {

using base::Json;

namespace {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// Byte trie for leftmost-longest matching of added tokens.
class Trie {
 public:
  void Insert(std::string_view s, uint32_t token_index) {
    if (s.empty()) return;
    uint32_t node = 0;
    for (unsigned char c : s) {
      auto& kids = nodes_[node].kids;
      auto it = kids.find(c);
      if (it == kids.end()) {
        nodes_.push_back({});
        uint32_t child = static_cast<uint32_t>(nodes_.size() - 1);
        nodes_[node].kids.emplace(c, child);  // re-lookup: push_back may have moved `kids`
        node = child;
      } else {
        node = it->second;
      }
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(token_index);
  }
  // Longest token starting at s[pos]: returns its length (0 if none) and index.
  size_t Longest(std::string_view s, size_t pos, uint32_t* token_index) const {
    uint32_t node = 0;
    size_t best = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      auto it = nodes_[node].kids.find(static_cast<unsigned char>(s[i]));
      if (it == nodes_[node].kids.end()) break;
      node = it->second;
      if (nodes_[node].token >= 0) {
        best = i + 1 - pos;
        *token_index = static_cast<uint32_t>(nodes_[node].token);
      }
    }
    return best;
  }
  bool empty() const { return nodes_.size() == 1; }

 private:
  struct Node {
    std::map<unsigned char, uint32_t> kids;
    int32_t token = -1;
  };
  std::vector<Node> nodes_ = {Node{}};
};

struct Piece {
  std::string text;
  int64_t token_id = -1;  // >= 0: an added token, not processed further
};

bool IsWordChar(char32_t c) { return IsAlphanumeric(c) || c == '_'; }

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  std::unordered_map<uint32_t, size_t> added_by_id;
  std::unordered_map<std::string, uint32_t> added_by_content;
  Trie raw_trie, norm_trie;
  // TemplateProcessing single-sequence template: ids before and after the sequence.
  std::vector<uint32_t> prefix_ids, suffix_ids;

  // HF AddedVocabulary::find_matches + split.
  void SplitAdded(const std::string& s, const Trie& trie, std::vector<Piece>* out) const {
    if (trie.empty()) {
      if (!s.empty()) out->push_back({s, -1});
      return;
    }
    size_t start_offset = 0, i = 0;
    while (i < s.size()) {
      uint32_t ti = 0;
      size_t len = trie.Longest(s, i, &ti);
      if (len == 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[ti];
      size_t start = i, stop = i + len;
      if (t.single_word) {
        bool start_ok = true, stop_ok = true;
        if (start > 0) {
          size_t k = start - 1;
          while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
          size_t kk = k;
          start_ok = !IsWordChar(NextCodePoint(s, &kk));
        }
        if (stop < s.size()) {
          size_t kk = stop;
          stop_ok = !IsWordChar(NextCodePoint(s, &kk));
        }
        if (!start_ok || !stop_ok) {
          ++i;
          continue;
        }
      }
      if (t.lstrip) {
        size_t k = start;
        while (k > start_offset) {
          size_t p = k - 1;
          while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
          size_t pp = p;
          if (!IsWhitespace(NextCodePoint(s, &pp))) break;
          k = p;
        }
        start = std::max(k, start_offset);
      }
      if (t.rstrip) {
        size_t k = stop;
        while (k < s.size()) {
          size_t kk = k;
          if (!IsWhitespace(NextCodePoint(s, &kk))) break;
          k = kk;
        }
        stop = k;
      }
      if (start_offset < start) out->push_back({s.substr(start_offset, start - start_offset), -1});
      out->push_back({s.substr(start, stop - start), static_cast<int64_t>(t.id)});
      start_offset = stop;
      i = stop;
    }
    if (start_offset < s.size()) out->push_back({s.substr(start_offset), -1});
  }
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::Load(const std::string& path) {
  std::string text = base::ReadFileToString(path, 1ull << 30);
  return FromJson(text, path);
}

std::unique_ptr<Tokenizer> Tokenizer::FromJson(std::string_view json, std::string_view name) {
  Json root = Json::Parse(json, name, 64);
  ENGRAM_CHECK(root.is_object(), Code::kCorrupt,
               name << ": a tokenizer.json must be a JSON object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  Impl& im = *t->impl_;
  const Json* model = root.Find("model");
  ENGRAM_CHECK(model && model->is_object(), Code::kCorrupt, name << ": no \"model\" object");
  const Json* mtype = model->Find("type");
  // Old files omit model.type for BPE; accept that when merges are present.
  bool is_bpe = (mtype && mtype->is_string() && mtype->as_string() == "BPE") ||
                (!mtype && model->Find("merges"));
  ENGRAM_CHECK(is_bpe, Code::kInvalidArgument,
               name << ": model type \"" << (mtype && mtype->is_string() ? mtype->as_string() : "?")
                    << "\" is not supported; engramctl reads byte-level BPE tokenizers");
  im.model = std::make_unique<BpeModel>(*model, name);
  uint32_t vocab_size = im.model->max_id_plus_one();

  if (const Json* n = root.Find("normalizer")) im.normalizer = MakeNormalizer(*n, name);
  if (const Json* p = root.Find("pre_tokenizer")) im.pre = MakePreTokenizer(*p, name);
  if (const Json* d = root.Find("decoder")) im.decoder = MakeDecoder(*d, name);

  if (const Json* at = root.Find("added_tokens"); at && at->is_array()) {
    const uint64_t id_limit = uint64_t{vocab_size} + at->items().size() + kMaxIdGap;
    for (const Json& a : at->items()) {
      AddedToken tok;
      const Json* id = a.Find("id");
      const Json* content = a.Find("content");
      ENGRAM_CHECK(
          id && id->as_uint64() && *id->as_uint64() < (1u << 31) && content && content->is_string(),
          Code::kCorrupt, name << ": an added token needs an integer id and a string content");
      ENGRAM_CHECK(*id->as_uint64() < id_limit, Code::kCorrupt,
                   name << ": added token id " << *id->as_uint64() << " leaves more than "
                        << kMaxIdGap << " unused ids after the vocabulary; ids must be dense");
      tok.id = static_cast<uint32_t>(*id->as_uint64());
      tok.content = content->as_string();
      auto flag = [&](const char* k, bool d) {
        const Json* v = a.Find(k);
        return v && v->is_bool() ? v->as_bool() : d;
      };
      tok.single_word = flag("single_word", false);
      tok.lstrip = flag("lstrip", false);
      tok.rstrip = flag("rstrip", false);
      tok.normalized = flag("normalized", !flag("special", false));
      tok.special = flag("special", false);
      vocab_size = std::max(vocab_size, tok.id + 1);
      im.added_by_id[tok.id] = im.added.size();
      im.added_by_content[tok.content] = tok.id;
      im.added.push_back(tok);
    }
  }
  for (uint32_t i = 0; i < im.added.size(); ++i) {
    const AddedToken& tok = im.added[i];
    if (!tok.normalized) {
      im.raw_trie.Insert(tok.content, i);
    } else {
      std::string n = im.normalizer ? im.normalizer->Apply(tok.content) : tok.content;
      im.norm_trie.Insert(n, i);
    }
  }

  if (const Json* pp = root.Find("post_processor"); pp && !pp->is_null()) {
    const Json* type = pp->Find("type");
    std::string ty = type && type->is_string() ? type->as_string() : "";
    auto template_of = [&](const Json& p) {
      const Json* single = p.Find("single");
      const Json* specials = p.Find("special_tokens");
      ENGRAM_CHECK(single && single->is_array(), Code::kCorrupt,
                   name << ": TemplateProcessing without \"single\"");
      bool seen_seq = false;
      for (const Json& item : single->items()) {
        if (item.Find("Sequence")) {
          seen_seq = true;
          continue;
        }
        const Json* st = item.Find("SpecialToken");
        ENGRAM_CHECK(st && st->Find("id") && specials, Code::kCorrupt,
                     name << ": malformed TemplateProcessing item");
        const std::string& key = st->Find("id")->as_string();
        const Json* def = specials->Find(key);
        ENGRAM_CHECK(def && def->Find("ids") && def->Find("ids")->is_array(), Code::kCorrupt,
                     name << ": TemplateProcessing special token \"" << key << "\" is undefined");
        for (const Json& idj : def->Find("ids")->items()) {
          auto v = idj.as_uint64();
          ENGRAM_CHECK(v.has_value(), Code::kCorrupt, name << ": bad id in TemplateProcessing");
          (seen_seq ? im.suffix_ids : im.prefix_ids).push_back(static_cast<uint32_t>(*v));
        }
      }
    };
    if (ty == "TemplateProcessing") {
      template_of(*pp);
    } else if (ty == "Sequence") {
      if (const Json* list = pp->Find("processors"); list && list->is_array())
        for (const Json& p : list->items()) {
          const Json* t2 = p.Find("type");
          std::string ty2 = t2 && t2->is_string() ? t2->as_string() : "";
          if (ty2 == "TemplateProcessing")
            template_of(p);
          else
            ENGRAM_CHECK(ty2 == "ByteLevel", Code::kInvalidArgument,
                         name << ": post_processor type \"" << ty2 << "\" is not supported");
        }
    } else {
      ENGRAM_CHECK(
          ty == "ByteLevel", Code::kInvalidArgument,
          name << ": post_processor type \"" << ty
               << "\" is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
    }
  }
  t->vocab_size_ = vocab_size;
  return t;
}

void Encoder::EncodeAppend(std::string_view text, std::vector<uint32_t>* out,
                           bool add_special_tokens, size_t* n_replaced) {
  const Tokenizer::Impl& im = *t_.impl_;
  size_t replaced = MakeValidUtf8(text, &scratch_);
  if (n_replaced) *n_replaced += replaced;
  if (add_special_tokens) out->insert(out->end(), im.prefix_ids.begin(), im.prefix_ids.end());
  std::vector<Piece> step1;
  im.SplitAdded(scratch_, im.raw_trie, &step1);
  std::vector<Piece> step2;
  for (auto& p : step1) {
    if (p.token_id >= 0) {
      step2.push_back(std::move(p));
      continue;
    }
    std::string n = im.normalizer ? im.normalizer->Apply(p.text) : std::move(p.text);
    im.SplitAdded(n, im.norm_trie, &step2);
  }
  std::vector<std::string> words;
  for (auto& p : step2) {
    if (p.token_id >= 0) {
      out->push_back(static_cast<uint32_t>(p.token_id));
      continue;
    }
    words.clear();
    words.push_back(std::move(p.text));
    if (im.pre) im.pre->Split(&words);
    for (const auto& w : words) im.model->Tokenize(w, out, &cache_);
  }
  if (add_special_tokens) out->insert(out->end(), im.suffix_ids.begin(), im.suffix_ids.end());
  if (cache_.size() > 100000) cache_.clear();
}

std::vector<uint32_t> Encoder::Encode(std::string_view text, bool add_special_tokens,
                                      size_t* n_replaced) {
  std::vector<uint32_t> out;
  EncodeAppend(text, &out, add_special_tokens, n_replaced);
  return out;
}

std::vector<uint32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  Encoder e(*this);
  return e.Encode(text, add_special_tokens);
}

std::string Tokenizer::Decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    auto it = impl_->added_by_id.find(id);
    if (it != impl_->added_by_id.end()) {
      const AddedToken& t = impl_->added[it->second];
      if (skip_special_tokens && t.special) continue;
      tokens.push_back(t.content);
      continue;
    }
    if (const std::string* s = impl_->model->IdToToken(id)) tokens.push_back(*s);
  }
  if (!impl_->decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  std::string out;
  for (auto& s : impl_->decoder->DecodeChain(std::move(tokens))) out += s;
  return out;
}

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlongs, surrogates, or code
// points above U+10FFFF).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const size_t left = s.size() - i;
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F)) return 0;
    return 4;
  }
  return 0;
}
}  // namespace

std::string Tokenizer::TokenText(uint32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end())
    return impl_->added[it->second].content;
  const std::string* s = impl_->model->IdToToken(id);
  if (!s) return "";
  // A byte-level vocabulary string maps back to raw bytes; anything else is decoded as is.
  std::string raw;
  bool byte_level = true;
  for (size_t i = 0; i < s->size() && byte_level;) {
    size_t n = Utf8SequenceAt(*s, i);
    if (n == 0) {
      byte_level = false;
      break;
    }
    char32_t cp = static_cast<uint8_t>((*s)[i]);
    if (n > 1) {
      cp &= n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07;
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>((*s)[i + k]) & 0x3F);
    }
    int byte = CharToByte(cp);
    if (byte < 0) byte_level = false;
    raw.push_back(static_cast<char>(byte));
    i += n;
  }
  if (!byte_level) {
    uint32_t one[1] = {id};
    raw = Decode(one);
  }
  std::string out;
  for (size_t i = 0; i < raw.size();) {
    size_t n = Utf8SequenceAt(raw, i);
    if (n == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<uint8_t>(raw[i]));
      out += hex;
      ++i;
    } else {
      out.append(raw, i, n);
      i += n;
    }
  }
  return out;
}

std::optional<uint32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model->TokenToId(token);
}

std::string Tokenizer::IdToToken(uint32_t id) const {
  auto it = impl_->added_by_id.find(id);
  if (it != impl_->added_by_id.end()) return impl_->added[it->second].content;
  if (const std::string* s = impl_->model->IdToToken(id)) return *s;
  return {};
}

bool Tokenizer::IsSpecial(uint32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

uint64_t Tokenizer::Fingerprint() const {
  hash::Checksum64Stream s;
  for (uint32_t id = 0; id < vocab_size_; ++id) {
    std::string tok = IdToToken(id);
    uint32_t len = static_cast<uint32_t>(tok.size());
    s.Update(&id, 4);
    s.Update(&len, 4);
    s.Update(tok.data(), tok.size());
  }
  return s.Digest();
}

}  // namespace engram::tokenizer

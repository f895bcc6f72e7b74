// Normalizer / pre-tokenizer / decoder stages with HF tokenizers semantics.
#include "engram/tokenizer/components.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "engram/base/error.h"
#include "engram/base/text.h"
#include "engram/tokenizer/regex.h"
#include "engram/tokenizer/unicode.h"

namespace engram::tokenizer {

using base::Json;

namespace {

std::string TypeOf(const Json& j, std::string_view what, std::string_view kind) {
  const Json* t = j.Find("type");
  ENGRAM_CHECK(j.is_object() && t && t->is_string(), Code::kCorrupt,
               what << ": a " << kind << " without a \"type\"");
  return t->as_string();
}

const Json& Need(const Json& j, std::string_view key, std::string_view what,
                 std::string_view kind) {
  const Json* v = j.Find(key);
  ENGRAM_CHECK(v != nullptr, Code::kCorrupt, what << ": " << kind << " lacks \"" << key << "\"");
  return *v;
}

bool BoolOr(const Json& j, std::string_view key, bool dflt) {
  const Json* v = j.Find(key);
  return v && v->is_bool() ? v->as_bool() : dflt;
}

// A Split/Replace pattern: {"String": "..."} or {"Regex": "..."}.
std::unique_ptr<Regex> PatternOf(const Json& p, std::string_view what) {
  if (const Json* s = p.Find("String"); s && s->is_string())
    return std::make_unique<Regex>(EscapeRegex(s->as_string()), what);
  if (const Json* r = p.Find("Regex"); r && r->is_string())
    return std::make_unique<Regex>(r->as_string(), what);
  ENGRAM_THROW(Code::kCorrupt, what << ": a pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

// ---- normalizers ----

class SequenceNorm : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> parts;
  std::string Apply(std::string_view s) const override {
    std::string cur(s);
    for (const auto& p : parts) cur = p->Apply(cur);
    return cur;
  }
};

class UnicodeNorm : public Normalizer {
 public:
  explicit UnicodeNorm(NormForm f) : f_(f) {}
  std::string Apply(std::string_view s) const override { return Normalize(s, f_); }

 private:
  NormForm f_;
};

class LowercaseNorm : public Normalizer {
 public:
  std::string Apply(std::string_view s) const override { return Lowercase(s); }
};

class StripAccentsNorm : public Normalizer {
 public:
  std::string Apply(std::string_view s) const override { return StripMarks(s); }
};

class StripNorm : public Normalizer {
 public:
  StripNorm(bool l, bool r) : l_(l), r_(r) {}
  std::string Apply(std::string_view s) const override { return StripWhitespace(s, l_, r_); }

 private:
  bool l_, r_;
};

class ReplaceNorm : public Normalizer {
 public:
  ReplaceNorm(std::unique_ptr<Regex> re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  std::string Apply(std::string_view s) const override {
    std::string out;
    size_t prev = 0;
    for (auto [a, b] : re_->FindAll(s)) {
      if (a == b) continue;
      out.append(s.substr(prev, a - prev));
      out.append(content_);
      prev = b;
    }
    out.append(s.substr(prev));
    return out;
  }

 private:
  std::unique_ptr<Regex> re_;
  std::string content_;
};

class PrependNorm : public Normalizer {
 public:
  explicit PrependNorm(std::string p) : p_(std::move(p)) {}
  std::string Apply(std::string_view s) const override {
    if (s.empty()) return {};
    return p_ + std::string(s);
  }

 private:
  std::string p_;
};

// ---- pre-tokenizers ----

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior ParseBehavior(const std::string& b, std::string_view what) {
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  ENGRAM_THROW(Code::kCorrupt, what << ": unknown split behavior \"" << b << "\"");
}

// HF NormalizedString::split over (offsets, is_match) spans covering the piece.
void SplitBy(std::string_view s,
             const std::vector<std::pair<std::pair<size_t, size_t>, bool>>& spans,
             Behavior behavior, std::vector<std::string>* out) {
  std::vector<std::pair<size_t, size_t>> pieces;  // kept ranges
  switch (behavior) {
    case Behavior::kIsolated:
      for (auto& [r, m] : spans) pieces.push_back(r);
      break;
    case Behavior::kRemoved:
      for (auto& [r, m] : spans)
        if (!m) pieces.push_back(r);
      break;
    case Behavior::kContiguous: {
      bool prev_match = false;
      for (auto& [r, m] : spans) {
        if (m && prev_match && !pieces.empty())
          pieces.back().second = r.second;
        else
          pieces.push_back(r);
        prev_match = m;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto& [r, m] : spans) {
        if (m && !prev_match && !pieces.empty())
          pieces.back().second = r.second;
        else
          pieces.push_back(r);
        prev_match = m;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      // HF folds from the end: a match joins the piece after it unless that piece is a match.
      bool next_match = false;
      for (size_t i = spans.size(); i-- > 0;) {
        auto [r, m] = spans[i];
        if (m && !next_match && !pieces.empty())
          pieces.back().first = r.first;
        else
          pieces.push_back(r);
        next_match = m;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  for (auto [a, b] : pieces)
    if (b > a) out->emplace_back(s.substr(a, b - a));
}

std::vector<std::pair<std::pair<size_t, size_t>, bool>> Spans(const Regex& re, std::string_view s,
                                                              bool invert) {
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> spans;
  if (s.empty()) {
    spans.push_back({{0, 0}, false});
    return spans;
  }
  size_t prev = 0;
  for (auto [a, b] : re.FindAll(s)) {
    if (prev != a) spans.push_back({{prev, a}, invert});
    spans.push_back({{a, b}, !invert});
    prev = b;
  }
  if (prev != s.size()) spans.push_back({{prev, s.size()}, invert});
  return spans;
}

class SequencePre : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  void Split(std::vector<std::string>* pieces) const override {
    for (const auto& p : parts) p->Split(pieces);
  }
};

class SplitPre : public PreTokenizer {
 public:
  SplitPre(std::unique_ptr<Regex> re, Behavior b, bool invert)
      : re_(std::move(re)), b_(b), invert_(invert) {}
  void Split(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    out.reserve(pieces->size() * 2);
    for (const auto& p : *pieces) SplitBy(p, Spans(*re_, p, invert_), b_, &out);
    *pieces = std::move(out);
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior b_;
  bool invert_;
};

const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, std::string_view what)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_ = std::make_unique<Regex>(kGpt2Pattern, what);
  }
  void Split(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    out.reserve(pieces->size());
    for (auto& p : *pieces) {
      std::string piece = add_prefix_space_ && (p.empty() || p[0] != ' ') ? " " + p : std::move(p);
      if (re_) {
        std::vector<std::string> tmp;
        SplitBy(piece, Spans(*re_, piece, false), Behavior::kIsolated, &tmp);
        for (auto& t : tmp) out.push_back(ByteLevelEncode(t));
      } else if (!piece.empty()) {
        out.push_back(ByteLevelEncode(piece));
      }
    }
    *pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

class DigitsPre : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual, std::string_view what)
      : re_(std::make_unique<Regex>(individual ? "\\p{N}" : "\\p{N}+", what)) {}
  void Split(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    for (const auto& p : *pieces) SplitBy(p, Spans(*re_, p, false), Behavior::kIsolated, &out);
    *pieces = std::move(out);
  }

 private:
  std::unique_ptr<Regex> re_;
};

class WhitespaceSplitPre : public PreTokenizer {
 public:
  void Split(std::vector<std::string>* pieces) const override {
    std::vector<std::string> out;
    for (const auto& p : *pieces) {
      size_t i = 0, start = 0;
      bool in_word = false;
      while (i < p.size()) {
        size_t at = i;
        char32_t c = NextCodePoint(p, &i);
        if (IsWhitespace(c)) {
          if (in_word) out.push_back(p.substr(start, at - start));
          in_word = false;
        } else if (!in_word) {
          in_word = true;
          start = at;
        }
      }
      if (in_word) out.push_back(p.substr(start));
    }
    *pieces = std::move(out);
  }
};

// ---- decoders ----

class SequenceDec : public Decoder {
 public:
  std::vector<std::unique_ptr<Decoder>> parts;
  std::vector<std::string> DecodeChain(std::vector<std::string> t) const override {
    for (const auto& p : parts) t = p->DecodeChain(std::move(t));
    return t;
  }
};

class ByteLevelDec : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string one;
      bool all = true;
      size_t i = 0;
      while (i < t.size()) {
        int b = CharToByte(NextCodePoint(t, &i));
        if (b < 0) {
          all = false;
          break;
        }
        one.push_back(static_cast<char>(b));
      }
      bytes += all ? one : t;
    }
    std::string valid;
    MakeValidUtf8(bytes, &valid);
    return {valid};
  }
};

class ReplaceDec : public Decoder {
 public:
  ReplaceDec(std::unique_ptr<Regex> re, std::string content)
      : n_(std::move(re), std::move(content)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> t) const override {
    for (auto& s : t) s = n_.Apply(s);
    return t;
  }

 private:
  ReplaceNorm n_;
};

class FuseDec : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> t) const override {
    std::string all;
    for (auto& s : t) all += s;
    return {all};
  }
};

class StripDec : public Decoder {
 public:
  StripDec(std::string content, size_t start, size_t stop)
      : content_(ToU32(content)), start_(start), stop_(stop) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> t) const override {
    for (auto& s : t) {
      std::u32string u = ToU32(s);
      size_t a = 0, b = u.size();
      for (size_t k = 0; k < start_ && a < b && content_.size() == 1 && u[a] == content_[0]; ++k)
        ++a;
      for (size_t k = 0; k < stop_ && b > a && content_.size() == 1 && u[b - 1] == content_[0]; ++k)
        --b;
      s = FromU32(u.substr(a, b - a));
    }
    return t;
  }

 private:
  std::u32string content_;
  size_t start_, stop_;
};

class ByteFallbackDec : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t n_pending = 0;
    auto flush = [&] {
      if (!n_pending) return;
      std::string valid;
      if (MakeValidUtf8(pending, &valid) == 0) {
        out.push_back(valid);
      } else {
        for (size_t k = 0; k < n_pending; ++k) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
      n_pending = 0;
    };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>') {
        char* end = nullptr;
        long v = std::strtol(t.substr(3, 2).c_str(), &end, 16);
        if (end && *end == '\0') {
          pending.push_back(static_cast<char>(v));
          ++n_pending;
          continue;
        }
      }
      flush();
      out.push_back(t);
    }
    flush();
    return out;
  }
};

std::array<char32_t, 256> MakeByteTable() {
  std::array<char32_t, 256> t{};
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    t[b] = keep ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
  }
  return t;
}
const std::array<char32_t, 256> kByteToChar = MakeByteTable();

}  // namespace

char32_t ByteToChar(uint8_t b) noexcept { return kByteToChar[b]; }

int CharToByte(char32_t c) noexcept {
  if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))
    return static_cast<int>(c);
  if (c >= 256 && c < 256 + 68) {
    for (int b = 0; b < 256; ++b)
      if (kByteToChar[b] == c) return b;
  }
  return -1;
}

std::string ByteLevelEncode(std::string_view bytes) {
  static const std::array<std::string, 256> kUtf8 = [] {
    std::array<std::string, 256> a;
    for (int b = 0; b < 256; ++b) base::AppendUtf8(&a[b], kByteToChar[b]);
    return a;
  }();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += kUtf8[b];
  return out;
}

std::unique_ptr<Normalizer> MakeNormalizer(const Json& j, std::string_view what) {
  if (j.is_null()) return nullptr;
  std::string type = TypeOf(j, what, "normalizer");
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceNorm>();
    const Json& list = Need(j, "normalizers", what, "Sequence normalizer");
    ENGRAM_CHECK(list.is_array(), Code::kCorrupt,
                 what << ": Sequence.normalizers must be an array");
    for (const Json& n : list.items())
      if (auto p = MakeNormalizer(n, what)) seq->parts.push_back(std::move(p));
    return seq;
  }
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNorm>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNorm>();
  if (type == "Strip")
    return std::make_unique<StripNorm>(BoolOr(j, "strip_left", true),
                                       BoolOr(j, "strip_right", true));
  if (type == "Replace") {
    const Json& c = Need(j, "content", what, "Replace normalizer");
    return std::make_unique<ReplaceNorm>(
        PatternOf(Need(j, "pattern", what, "Replace normalizer"), what), c.as_string());
  }
  if (type == "Prepend")
    return std::make_unique<PrependNorm>(
        Need(j, "prepend", what, "Prepend normalizer").as_string());
  ENGRAM_THROW(Code::kInvalidArgument,
               what << ": normalizer type \"" << type
                    << "\" is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, "
                       "Lowercase, StripAccents, Strip, Replace, Prepend)");
}

std::unique_ptr<PreTokenizer> MakePreTokenizer(const Json& j, std::string_view what) {
  if (j.is_null()) return nullptr;
  std::string type = TypeOf(j, what, "pre_tokenizer");
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePre>();
    const Json& list = Need(j, "pretokenizers", what, "Sequence pre_tokenizer");
    ENGRAM_CHECK(list.is_array(), Code::kCorrupt,
                 what << ": Sequence.pretokenizers must be an array");
    for (const Json& p : list.items())
      if (auto x = MakePreTokenizer(p, what)) seq->parts.push_back(std::move(x));
    return seq;
  }
  if (type == "Split") {
    const Json& b = Need(j, "behavior", what, "Split pre_tokenizer");
    return std::make_unique<SplitPre>(
        PatternOf(Need(j, "pattern", what, "Split pre_tokenizer"), what),
        ParseBehavior(b.as_string(), what), BoolOr(j, "invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(BoolOr(j, "add_prefix_space", true),
                                          BoolOr(j, "use_regex", true), what);
  if (type == "Digits")
    return std::make_unique<DigitsPre>(BoolOr(j, "individual_digits", false), what);
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPre>();
  ENGRAM_THROW(Code::kInvalidArgument,
               what << ": pre_tokenizer type \"" << type
                    << "\" is not supported (supported: Sequence, Split, ByteLevel, Digits, "
                       "WhitespaceSplit)");
}

std::unique_ptr<Decoder> MakeDecoder(const Json& j, std::string_view what) {
  if (j.is_null()) return nullptr;
  std::string type = TypeOf(j, what, "decoder");
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceDec>();
    const Json& list = Need(j, "decoders", what, "Sequence decoder");
    ENGRAM_CHECK(list.is_array(), Code::kCorrupt, what << ": Sequence.decoders must be an array");
    for (const Json& d : list.items())
      if (auto x = MakeDecoder(d, what)) seq->parts.push_back(std::move(x));
    return seq;
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Replace") {
    const Json& c = Need(j, "content", what, "Replace decoder");
    return std::make_unique<ReplaceDec>(
        PatternOf(Need(j, "pattern", what, "Replace decoder"), what), c.as_string());
  }
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Strip") {
    const Json* c = j.Find("content");
    const Json* a = j.Find("start");
    const Json* b = j.Find("stop");
    return std::make_unique<StripDec>(c ? c->as_string() : " ", a ? a->as_uint64().value_or(0) : 0,
                                      b ? b->as_uint64().value_or(0) : 0);
  }
  ENGRAM_THROW(Code::kInvalidArgument,
               what << ": decoder type \"" << type
                    << "\" is not supported (supported: Sequence, ByteLevel, Replace, Fuse, "
                       "ByteFallback, Strip)");
}

}  // namespace engram::tokenizer

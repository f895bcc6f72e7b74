// Canonical-id compression of a tokenizer vocabulary.
#include "engram/tokenizer/canonical.h"

#include <unordered_map>

#include "engram/tokenizer/tokenizer.h"
#include "engram/tokenizer/unicode.h"

namespace engram::tokenizer {

std::string CanonicalKey(std::string_view decoded) {
  std::string s = Normalize(decoded, NormForm::kNFKC);
  s = Normalize(s, NormForm::kNFD);
  s = StripMarks(s);
  s = Lowercase(s);
  std::string collapsed;
  collapsed.reserve(s.size());
  bool in_ws = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (!in_ws) collapsed.push_back(' ');
      in_ws = true;
    } else {
      collapsed.push_back(c);
      in_ws = false;
    }
  }
  // The reference protects a lone space with the private-use sentinel U+E000, strips, then
  // turns every U+E000 back into a space (including any the token itself contained).
  static const std::string kSentinel = "\xEE\x80\x80";
  if (collapsed == " ") collapsed = kSentinel;
  std::string stripped = StripWhitespace(collapsed, true, true);
  std::string out;
  out.reserve(stripped.size());
  for (size_t i = 0; i < stripped.size();) {
    if (stripped.compare(i, 3, kSentinel) == 0) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(stripped[i++]);
    }
  }
  return out;
}

CanonicalMap BuildCanonicalMap(const Tokenizer& t) {
  CanonicalMap cm;
  cm.map.resize(t.vocab_size());
  std::unordered_map<std::string, uint32_t> key_to_id;
  key_to_id.reserve(t.vocab_size());
  for (uint32_t id = 0; id < t.vocab_size(); ++id) {
    uint32_t one[1] = {id};
    std::string text = t.Decode(one, false);
    std::string key;
    if (text.find("\xEF\xBF\xBD") != std::string::npos) {
      key = t.IdToToken(id);
    } else {
      key = CanonicalKey(text);
      if (key.empty()) key = text;
    }
    auto [it, inserted] =
        key_to_id.emplace(std::move(key), static_cast<uint32_t>(key_to_id.size()));
    cm.map[id] = it->second;
  }
  cm.canonical_vocab = static_cast<uint32_t>(key_to_id.size());
  return cm;
}

}  // namespace engram::tokenizer

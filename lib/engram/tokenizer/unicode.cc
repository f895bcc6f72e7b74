// utf8proc-backed normalisation and character classes matching the HF tokenizers semantics.
#include "engram/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>

#include "engram/base/error.h"
#include "engram/base/text.h"

namespace engram::tokenizer {

char32_t NextCodePoint(std::string_view s, size_t* i) noexcept {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(*i);
  if (c < 0x80) {
    *i += 1;
    return c;
  }
  if ((c & 0xE0) == 0xC0 && *i + 1 < s.size()) {
    char32_t cp = ((c & 0x1Fu) << 6) | (b(*i + 1) & 0x3Fu);
    *i += 2;
    return cp;
  }
  if ((c & 0xF0) == 0xE0 && *i + 2 < s.size()) {
    char32_t cp = ((c & 0x0Fu) << 12) | ((b(*i + 1) & 0x3Fu) << 6) | (b(*i + 2) & 0x3Fu);
    *i += 3;
    return cp;
  }
  if ((c & 0xF8) == 0xF0 && *i + 3 < s.size()) {
    char32_t cp = ((c & 0x07u) << 18) | ((b(*i + 1) & 0x3Fu) << 12) | ((b(*i + 2) & 0x3Fu) << 6) |
                  (b(*i + 3) & 0x3Fu);
    *i += 4;
    return cp;
  }
  *i += 1;
  return 0xFFFD;
}

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(NextCodePoint(s, &i));
  return out;
}

std::string FromU32(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) base::AppendUtf8(&out, c);
  return out;
}

size_t MakeValidUtf8(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  size_t replaced = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const size_t n = in.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // Unicode Table 3-7 well-formed sequences; a maximal prefix of a valid sequence that is cut
    // short is replaced by one U+FFFD, other bytes one each.
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      need = 1;
    else if (c == 0xE0) {
      need = 2;
      lo = 0xA0;
    } else if (c >= 0xE1 && c <= 0xEC)
      need = 2;
    else if (c == 0xED) {
      need = 2;
      hi = 0x9F;
    } else if (c >= 0xEE && c <= 0xEF)
      need = 2;
    else if (c == 0xF0) {
      need = 3;
      lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3)
      need = 3;
    else if (c == 0xF4) {
      need = 3;
      hi = 0x8F;
    } else {
      out->append("\xEF\xBF\xBD");
      ++replaced;
      ++i;
      continue;
    }
    size_t k = 1;
    bool ok = true;
    for (; k <= need; ++k) {
      if (i + k >= n) {
        ok = false;
        break;
      }
      unsigned char cc = p[i + k];
      unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
      if (cc < l || cc > h) {
        ok = false;
        break;
      }
    }
    if (ok) {
      out->append(reinterpret_cast<const char*>(p + i), need + 1);
      i += need + 1;
    } else {
      out->append("\xEF\xBF\xBD");
      ++replaced;
      i += k;  // the valid prefix (at least the lead byte) is consumed as one replacement
    }
  }
  return replaced;
}

std::string Normalize(std::string_view s, NormForm form) {
  if (s.empty()) return {};
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case NormForm::kNFC:
      opts |= UTF8PROC_COMPOSE;
      break;
    case NormForm::kNFD:
      opts |= UTF8PROC_DECOMPOSE;
      break;
    case NormForm::kNFKC:
      opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormForm::kNFKD:
      opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(opts));
  ENGRAM_CHECK(n >= 0, Code::kInvalidArgument,
               "unicode normalisation failed: " << utf8proc_errmsg(n));
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string Lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = NextCodePoint(s, &i);
    if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
      out.push_back('i');
      base::AppendUtf8(&out, 0x307);
      continue;
    }
    base::AppendUtf8(&out,
                     static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

std::string StripMarks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = NextCodePoint(s, &i);
    utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME)
      continue;
    out.append(s.substr(start, i - start));
  }
  return out;
}

bool IsWhitespace(char32_t c) noexcept {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string StripWhitespace(std::string_view s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    size_t i = 0;
    while (i < s.size()) {
      size_t at = i;
      if (!IsWhitespace(NextCodePoint(s, &i))) {
        begin = at;
        break;
      }
      begin = i;
    }
  }
  if (right) {
    // Walk forward remembering the end of the last non-whitespace character.
    size_t i = begin, last = begin;
    while (i < s.size()) {
      char32_t c = NextCodePoint(s, &i);
      if (!IsWhitespace(c)) last = i;
    }
    end = last;
  }
  if (end < begin) end = begin;
  return std::string(s.substr(begin, end - begin));
}

bool IsAlphanumeric(char32_t c) noexcept {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  switch (cat) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool IsNumericDigit(char32_t c) noexcept {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND;
}

bool IsPunctuation(char32_t c) noexcept {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

}  // namespace engram::tokenizer

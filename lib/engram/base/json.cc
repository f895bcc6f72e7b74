// Recursive-descent JSON parser with a depth bound, exact integer access, and UTF-8 checks.
#include "engram/base/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/text.h"

namespace engram::base {

std::optional<int64_t> Json::as_int64() const noexcept {
  if (type_ != Type::kNumber) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(str_.data(), str_.data() + str_.size(), v);
  if (ec != std::errc() || p != str_.data() + str_.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> Json::as_uint64() const noexcept {
  if (type_ != Type::kNumber) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(str_.data(), str_.data() + str_.size(), v);
  if (ec != std::errc() || p != str_.data() + str_.size()) return std::nullopt;
  return v;
}

const Json* Json::Find(std::string_view key) const noexcept {
  for (const auto& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

Json Json::MakeString(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.str_ = std::move(s);
  return j;
}

Json Json::MakeNumber(int64_t v) {
  Json j;
  j.type_ = Type::kNumber;
  j.str_ = std::to_string(v);
  j.number_ = static_cast<double>(v);
  return j;
}

Json Json::MakeArray(std::vector<Json> items) {
  Json j;
  j.type_ = Type::kArray;
  j.items_ = std::move(items);
  return j;
}

Json Json::MakeObject(std::vector<Member> members) {
  Json j;
  j.type_ = Type::kObject;
  j.members_ = std::move(members);
  return j;
}

void Json::Set(const std::string& key, Json value) {
  for (auto& m : members_)
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  members_.emplace_back(key, std::move(value));
}

std::string Json::Dump() const {
  switch (type_) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return bool_ ? "true" : "false";
    case Type::kNumber:
      return str_;
    case Type::kString:
      return JsonString(str_);
    case Type::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < items_.size(); ++i) s += (i ? "," : "") + items_[i].Dump();
      return s + "]";
    }
    case Type::kObject: {
      std::string s = "{";
      for (size_t i = 0; i < members_.size(); ++i)
        s += (i ? "," : "") + JsonString(members_[i].first) + ":" + members_[i].second.Dump();
      return s + "}";
    }
  }
  return "null";
}

class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view what, int max_depth)
      : s_(text), what_(what), max_depth_(max_depth) {}

  Json ParseDocument() {
    SkipWs();
    Json v = ParseValue(0);
    SkipWs();
    if (i_ != s_.size()) Fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void Fail(std::string_view why) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    ENGRAM_THROW(Code::kCorrupt, what_ << ": line " << line << " col " << col << ": " << why);
  }

  void SkipWs() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }

  Json ParseValue(int depth) {
    if (depth > max_depth_) Fail("nested deeper than " + std::to_string(max_depth_) + " levels");
    if (i_ >= s_.size()) Fail("unexpected end of input");
    char c = s_[i_];
    Json v;
    switch (c) {
      case '{':
        return ParseObject(depth);
      case '[':
        return ParseArray(depth);
      case '"':
        v.type_ = Json::Type::kString;
        v.str_ = ParseString();
        return v;
      case 't':
        Expect("true");
        v.type_ = Json::Type::kBool;
        v.bool_ = true;
        return v;
      case 'f':
        Expect("false");
        v.type_ = Json::Type::kBool;
        v.bool_ = false;
        return v;
      case 'n':
        Expect("null");
        return v;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
        Fail(std::string("unexpected character '") + c + "'");
    }
  }

  void Expect(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) Fail("invalid literal");
    i_ += word.size();
  }

  Json ParseNumber() {
    size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size()) Fail("bad number");
    if (s_[i_] == '0') {
      ++i_;
    } else if (s_[i_] >= '1' && s_[i_] <= '9') {
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    } else {
      Fail("bad number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) Fail("bad number");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) Fail("bad number");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    Json v;
    v.type_ = Json::Type::kNumber;
    v.str_.assign(s_.substr(start, i_ - start));
    v.number_ = std::strtod(v.str_.c_str(), nullptr);
    return v;
  }

  uint32_t ParseHex4() {
    if (i_ + 4 > s_.size()) Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        Fail("bad \\u escape");
    }
    return v;
  }

  std::string ParseString() {
    ++i_;  // opening quote
    std::string out;
    size_t run_start = i_;
    while (true) {
      if (i_ >= s_.size()) Fail("unterminated string");
      char c = s_[i_];
      if (c == '"') {
        out.append(s_.substr(run_start, i_ - run_start));
        ++i_;
        break;
      }
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in string");
      if (c != '\\') {
        ++i_;
        continue;
      }
      out.append(s_.substr(run_start, i_ - run_start));
      ++i_;
      if (i_ >= s_.size()) Fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = ParseHex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i_ + 2 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
              i_ += 2;
              uint32_t lo = ParseHex4();
              if (lo < 0xDC00 || lo > 0xDFFF) Fail("unpaired surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              Fail("unpaired surrogate in \\u escape");
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            Fail("unpaired surrogate in \\u escape");
          }
          base::AppendUtf8(&out, cp);
          break;
        }
        default:
          Fail("bad escape");
      }
      run_start = i_;
    }
    if (!IsValidUtf8(out)) Fail("string is not valid UTF-8");
    return out;
  }

  Json ParseArray(int depth) {
    ++i_;
    Json v;
    v.type_ = Json::Type::kArray;
    SkipWs();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return v;
    }
    while (true) {
      SkipWs();
      v.items_.push_back(ParseValue(depth + 1));
      SkipWs();
      if (i_ >= s_.size()) Fail("unterminated array");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == ']') {
        ++i_;
        return v;
      }
      Fail("expected ',' or ']'");
    }
  }

  Json ParseObject(int depth) {
    ++i_;
    Json v;
    v.type_ = Json::Type::kObject;
    SkipWs();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return v;
    }
    while (true) {
      SkipWs();
      if (i_ >= s_.size() || s_[i_] != '"') Fail("expected a string key");
      std::string key = ParseString();
      SkipWs();
      if (i_ >= s_.size() || s_[i_] != ':') Fail("expected ':'");
      ++i_;
      SkipWs();
      Json value = ParseValue(depth + 1);
      v.members_.emplace_back(std::move(key), std::move(value));
      SkipWs();
      if (i_ >= s_.size()) Fail("unterminated object");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') {
        ++i_;
        return v;
      }
      Fail("expected ',' or '}'");
    }
  }

  std::string_view s_;
  std::string_view what_;
  int max_depth_;
  size_t i_ = 0;
};

Json Json::Parse(std::string_view text, std::string_view what, int max_depth) {
  return JsonParser(text, what, max_depth).ParseDocument();
}

bool JsonShapeWithin(std::string_view text, size_t max_items, size_t max_total, int max_depth,
                     std::string* why) {
  size_t total = 0;
  struct Open {
    char kind;      // '[' or '{'
    size_t commas;  // separators seen at this level (values or members - 1)
  };
  std::vector<Open> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {  // skip the string
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      continue;
    }
    if ((c == '[' || c == '{' || c == ',') && ++total > max_total) {
      *why = "more than " + std::to_string(max_total) + " values";
      return false;
    }
    if (c == '[' || c == '{') {
      if (static_cast<int>(stack.size()) >= max_depth) {
        *why = "nested deeper than " + std::to_string(max_depth) + " levels";
        return false;
      }
      stack.push_back({c, 0});
    } else if (c == ']' || c == '}') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty() && ++stack.back().commas >= max_items) {
        *why = std::string(stack.back().kind == '[' ? "an array of more than "
                                                    : "an object of more than ") +
               std::to_string(max_items) + (stack.back().kind == '[' ? " values" : " members");
        return false;
      }
    }
  }
  return true;
}

bool IsValidUtf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
      return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  bool valid = IsValidUtf8(s);
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || (!valid && c >= 0x80)) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

}  // namespace engram::base

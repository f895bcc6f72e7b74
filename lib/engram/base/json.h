// A small, strict, bounded JSON reader (RFC 8259) and string escaper, for tokenizer.json,
// safetensors headers, HF config.json and JSONL entry files. Not for hot paths. It stays beside
// nlohmann-json (serve's library) because it parses the 7.5 MiB DeepSeek-V3 tokenizer.json 5x
// faster, which keeps the tokenizer load 1.6-1.7x quicker (bench/bench_json.sh).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engram::base {

class Json {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, Json>;

  Json() = default;
  Type type() const noexcept { return type_; }
  bool is_null() const noexcept { return type_ == Type::kNull; }
  bool is_bool() const noexcept { return type_ == Type::kBool; }
  bool is_number() const noexcept { return type_ == Type::kNumber; }
  bool is_string() const noexcept { return type_ == Type::kString; }
  bool is_array() const noexcept { return type_ == Type::kArray; }
  bool is_object() const noexcept { return type_ == Type::kObject; }

  bool as_bool() const noexcept { return bool_; }
  double as_double() const noexcept { return number_; }
  // The number's source text, for exact integer parsing.
  const std::string& number_text() const noexcept { return str_; }
  // Exact integer value when the number is an integer literal within range; nullopt otherwise.
  std::optional<int64_t> as_int64() const noexcept;
  std::optional<uint64_t> as_uint64() const noexcept;
  const std::string& as_string() const noexcept { return str_; }
  const std::vector<Json>& items() const noexcept { return items_; }
  const std::vector<Member>& members() const noexcept { return members_; }
  // Object member by key (first match), or nullptr. Linear scan: fine for small objects.
  const Json* Find(std::string_view key) const noexcept;

  // Parses one JSON text. Throws kCorrupt "<what>: line L col C: <problem>" on any error.
  // Nesting deeper than max_depth is refused (no unbounded recursion).
  static Json Parse(std::string_view text, std::string_view what, int max_depth = 128);

  // Builders (used by tests and writers of small metadata).
  static Json MakeString(std::string s);
  static Json MakeNumber(int64_t v);
  static Json MakeArray(std::vector<Json> items);
  static Json MakeObject(std::vector<Member> members);
  // Replaces (or appends) an object member.
  void Set(const std::string& key, Json value);
  // Compact JSON text (numbers keep their source text).
  std::string Dump() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string str_;
  std::vector<Json> items_;
  std::vector<Member> members_;
};

// Appends s as a JSON string literal (with quotes), escaping control characters, '"' and '\'.
// Invalid UTF-8 bytes are written as \u00XX of the byte (lossy, but never invalid JSON).
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);

// A scan that builds nothing: false (and why) as soon as an array of text holds more than
// max_items values, an object more than max_items members, the whole text more than max_total
// arrays, objects and separators, or nesting exceeds max_depth. Lets a reader refuse a hostile
// line before Json::Parse spends ~100 bytes per value on it. Does not validate the JSON
// otherwise (Parse does that).
bool JsonShapeWithin(std::string_view text, size_t max_items, size_t max_total, int max_depth,
                     std::string* why);

// True when s is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s) noexcept;

}  // namespace engram::base

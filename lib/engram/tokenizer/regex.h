// PCRE2 (UTF + UCP + JIT) wrapper with the match-iteration semantics HF tokenizers gets from
// Oniguruma: leftmost matches, ^/$ as line anchors, empty matches skipped by one character.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engram::tokenizer {

class Regex {
 public:
  // Throws kCorrupt with `what` and PCRE2's message and offset on a bad pattern.
  Regex(std::string_view pattern, std::string_view what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches as [start, end) byte offsets, left to right. Thread-safe.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view subject) const;
  const std::string& pattern() const noexcept { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// A pattern that matches `literal` exactly.
std::string EscapeRegex(std::string_view literal);

}  // namespace engram::tokenizer

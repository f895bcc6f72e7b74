// Small text helpers several modules share: UTF-8 encoding of a code point and the edit distance
// behind "did you mean" suggestions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace engram::base {

// Appends code point cp as UTF-8 (1 to 4 bytes; cp must be at most 0x10FFFF).
void AppendUtf8(std::string* out, char32_t cp);

// Levenshtein distance between a and b (bytes): insertions, deletions and substitutions.
size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace engram::base

// UTF-8 and Unicode helpers with the exact semantics the Hugging Face tokenizers library uses
// (Rust char::to_lowercase, char::is_whitespace, General_Category marks), over utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engram::tokenizer {

// Decodes one code point at s[*i] and advances *i. Assumes valid UTF-8 (see MakeValidUtf8).
char32_t NextCodePoint(std::string_view s, size_t* i) noexcept;
std::u32string ToU32(std::string_view s);
std::string FromU32(std::u32string_view s);

// Replaces every maximal ill-formed subsequence with U+FFFD, as WHATWG TextDecoder, Node's
// Buffer.toString('utf8') and Rust's String::from_utf8_lossy do. Returns how many were replaced.
size_t MakeValidUtf8(std::string_view in, std::string* out);

enum class NormForm { kNFC, kNFD, kNFKC, kNFKD };
std::string Normalize(std::string_view s, NormForm form);

// Rust char::to_lowercase applied to every character (no context-sensitive final sigma).
std::string Lowercase(std::string_view s);
// Removes characters of General_Category Mn, Mc, Me.
std::string StripMarks(std::string_view s);
// Rust char::is_whitespace (Unicode White_Space).
bool IsWhitespace(char32_t c) noexcept;
// Strips leading/trailing White_Space characters.
std::string StripWhitespace(std::string_view s, bool left, bool right);

bool IsAlphanumeric(char32_t c) noexcept;
bool IsNumericDigit(char32_t c) noexcept;  // General_Category Nd
bool IsPunctuation(char32_t c) noexcept;   // General_Category P*

}  // namespace engram::tokenizer

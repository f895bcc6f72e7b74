// DeepSeek's tokenizer compression (DESIGN §2): every token id to a canonical id, by the exact
// normaliser chain, in first-seen order over ascending ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engram::tokenizer {

class Tokenizer;

// NFKC -> NFD -> strip marks -> lowercase -> [ \t\r\n]+ to " " -> a lone " " is protected ->
// strip -> (restore the protected space).
std::string CanonicalKey(std::string_view decoded);

struct CanonicalMap {
  std::vector<uint32_t> map;  // tokenizer id -> canonical id
  uint32_t canonical_vocab = 0;
};

// Builds the map over ids 0..vocab_size-1: the key of an id is its decoded single-token text
// normalised by CanonicalKey (raw token string when the decoded text holds U+FFFD; the decoded
// text when the normalised key is empty).
CanonicalMap BuildCanonicalMap(const Tokenizer& tokenizer);

}  // namespace engram::tokenizer

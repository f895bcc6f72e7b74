// The pipeline stages of a Hugging Face tokenizer.json other than the model: normalizers,
// pre-tokenizers and decoders, built from their JSON. Unsupported component types are refused
// at load with a message naming them (never silently skipped).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engram/base/json.h"

namespace engram::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Apply(std::string_view s) const = 0;
};
// nullptr for a JSON null. `what` names the file for messages.
std::unique_ptr<Normalizer> MakeNormalizer(const base::Json& j, std::string_view what);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each piece further; pieces are byte strings (valid UTF-8 before ByteLevel).
  virtual void Split(std::vector<std::string>* pieces) const = 0;
};
std::unique_ptr<PreTokenizer> MakePreTokenizer(const base::Json& j, std::string_view what);

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF decode_chain: tokens in, tokens out.
  virtual std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const = 0;
};
std::unique_ptr<Decoder> MakeDecoder(const base::Json& j, std::string_view what);

// GPT-2 byte-to-unicode alphabet: byte b is written as the code point ByteToChar(b).
char32_t ByteToChar(uint8_t b) noexcept;
// Inverse; returns -1 for a code point outside the alphabet.
int CharToByte(char32_t c) noexcept;
// Maps raw bytes to their byte-level string (UTF-8 of the alphabet characters).
std::string ByteLevelEncode(std::string_view bytes);

}  // namespace engram::tokenizer

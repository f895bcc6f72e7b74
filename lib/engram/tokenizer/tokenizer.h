// A Hugging Face tokenizer.json (byte-level BPE family): added/special tokens, normalizer,
// pre-tokenizer, BPE model, post-processor and decoder, giving the same ids and decoded text as
// the `tokenizers` library. Input that is not valid UTF-8 has each maximal ill-formed
// subsequence replaced by U+FFFD first (what Node, Python and Rust do before handing text to
// tokenizers), and the count of replacements is reported.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace engram::tokenizer {

class Tokenizer;

// A per-thread encoding session with a word cache. Not thread-safe; cheap to create.
class Encoder {
 public:
  explicit Encoder(const Tokenizer& t) : t_(t) {}
  // Encodes text; `n_replaced` (optional) receives the number of invalid UTF-8 sequences replaced.
  std::vector<uint32_t> Encode(std::string_view text, bool add_special_tokens = false,
                               size_t* n_replaced = nullptr);
  void EncodeAppend(std::string_view text, std::vector<uint32_t>* out,
                    bool add_special_tokens = false, size_t* n_replaced = nullptr);

 private:
  const Tokenizer& t_;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  std::string scratch_;
};

class Tokenizer {
 public:
  // Throws kIo, kCorrupt (malformed JSON or structure, with the file and position) or
  // kInvalidArgument (a component type this implementation does not support, named).
  static std::unique_ptr<Tokenizer> Load(const std::string& path);
  static std::unique_ptr<Tokenizer> FromJson(std::string_view json, std::string_view name);
  ~Tokenizer();

  // Thread-safe convenience wrappers (no cache across calls; use Encoder for bulk work).
  std::vector<uint32_t> Encode(std::string_view text, bool add_special_tokens = false) const;
  // HF decode: ids -> tokens (added tokens by content; unknown ids skipped) -> decoder.
  std::string Decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id of the vocabulary and added tokens (len(tokenizer) in transformers).
  uint32_t vocab_size() const noexcept { return vocab_size_; }
  std::optional<uint32_t> TokenToId(std::string_view token) const;
  // The vocabulary string of an id (added token content for added tokens), "" if none.
  std::string IdToToken(uint32_t id) const;
  // What a person reads for one token: its decoded text ("深度" for the vocabulary string
  // "æ·±åº¦"), with each byte of an incomplete UTF-8 sequence written as <0xE6>. "" if no such id.
  std::string TokenText(uint32_t id) const;
  bool IsSpecial(uint32_t id) const;
  // schemas/table_format.md §4.4
  uint64_t Fingerprint() const;

 private:
  friend class Encoder;
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint32_t vocab_size_ = 0;
};

}  // namespace engram::tokenizer

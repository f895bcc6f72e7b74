// The BPE model of a tokenizer.json ("model": {"type": "BPE"}), merging by rank exactly as HF
// tokenizers does (lowest rank first, leftmost on ties), both merges formats ("a b" and ["a","b"]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engram/base/json.h"

namespace engram::tokenizer {

// Largest gap of unused ids a tokenizer file may leave (ids size arrays; see BpeModel).
inline constexpr uint32_t kMaxIdGap = 1u << 16;

class BpeModel {
 public:
  // Throws kCorrupt (malformed) or kInvalidArgument (unsupported options, e.g. dropout > 0).
  BpeModel(const base::Json& model, std::string_view what);

  // Appends the ids of one pre-token (a byte-level string) to out. `cache` may be null.
  void Tokenize(std::string_view word, std::vector<uint32_t>* out,
                std::unordered_map<std::string, std::vector<uint32_t>>* cache) const;

  std::optional<uint32_t> TokenToId(std::string_view token) const;
  // Vocabulary string of an id, or nullptr.
  const std::string* IdToToken(uint32_t id) const;
  uint32_t max_id_plus_one() const noexcept { return static_cast<uint32_t>(id_to_token_.size()); }

 private:
  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_token_;
  struct MergeValue {
    uint32_t rank;
    uint32_t new_id;
  };
  std::unordered_map<uint64_t, MergeValue> merges_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
};

}  // namespace engram::tokenizer

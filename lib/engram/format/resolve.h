// Turns what a user gave (config.toml, a --layout preset, explicit flags, a tokenizer) into one
// validated table Layout. Precedence: built-in defaults < config < preset < explicit flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/config/config.h"
#include "engram/format/layout.h"

namespace engram::format {

struct LayoutRequest {
  const config::Config* config = nullptr;  // optional
  std::string preset;                      // "", "engram-demo", "deepseek-v4.1"
  std::optional<std::string> addressing;   // "native" | "deepseek"
  std::optional<uint64_t> seed;
  std::optional<std::vector<uint32_t>> layer_ids;
  std::optional<uint32_t> max_order;
  std::optional<uint32_t> n_heads;
  std::optional<uint64_t> buckets;                  // native: buckets per sub-table (power of two);
                                                    // deepseek: base size of every order
  std::optional<std::vector<uint64_t>> base_sizes;  // deepseek: per order
  std::optional<uint32_t> row_dim;
  std::optional<base::DType> dtype;
  std::optional<uint32_t> pad_token;   // tokenizer id of the pad token
  std::optional<uint32_t> vocab_size;  // canonical vocabulary when there is no tokenizer
  std::string tokenizer_path;          // tokenizer.json: builds the canonical-id map
};

// Names of the presets, for --help.
const std::vector<std::string>& LayoutPresets();

// Resolves and validates. Throws kInvalidArgument / kConfig with the offending flag or key and
// the fix (for a config, all LayoutProblems at once).
Layout ResolveLayout(const LayoutRequest& request);

// Canonical map + tokenizer fingerprint of a tokenizer.json (cached per path in this process).
struct CanonInfo {
  std::vector<uint32_t> map;
  uint64_t fingerprint = 0;
  uint32_t canonical_vocab = 0;
};
const CanonInfo& CanonicalInfoFor(const std::string& tokenizer_path);

}  // namespace engram::format

// Layout resolution: defaults, config, presets, flags; canonical map from a tokenizer.
#include "engram/format/resolve.h"

#include <map>
#include <mutex>
#include <sstream>

#include "engram/base/checked.h"
#include "engram/base/error.h"
#include "engram/tokenizer/canonical.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::format {

const std::vector<std::string>& LayoutPresets() {
  static const std::vector<std::string> p = {"engram-demo", "deepseek-v4.1"};
  return p;
}

const CanonInfo& CanonicalInfoFor(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, CanonInfo> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  auto tok = tokenizer::Tokenizer::Load(path);
  CanonInfo info;
  tokenizer::CanonicalMap cm = tokenizer::BuildCanonicalMap(*tok);
  info.map = std::move(cm.map);
  info.canonical_vocab = cm.canonical_vocab;
  info.fingerprint = tok->Fingerprint();
  return cache.emplace(path, std::move(info)).first->second;
}

Layout ResolveLayout(const LayoutRequest& r) {
  hash::AddressSpec s;
  s.mode = hash::AddressingMode::kNative;
  s.seed = 0;
  s.layer_ids = {1};
  s.max_order = 3;
  s.n_heads = 8;
  uint64_t buckets = uint64_t{1} << 20;
  std::vector<uint64_t> base_sizes;
  uint32_t row_dim = 64;
  base::DType dtype = base::DType::kF32;
  std::optional<uint32_t> pad_token;
  std::optional<uint32_t> vocab;

  if (const config::Config* c = r.config) {
    std::vector<std::string> problems = config::LayoutProblems(*c);
    if (!problems.empty()) {
      std::ostringstream os;
      for (size_t i = 0; i < problems.size(); ++i) os << (i ? "\n" : "") << problems[i];
      ENGRAM_THROW(Code::kConfig, os.str());
    }
    const auto& e = c->engram;
    s.mode = e.addressing == "deepseek" ? hash::AddressingMode::kDeepSeek
                                        : hash::AddressingMode::kNative;
    s.seed = e.seed;
    s.layer_ids = e.layer_ids;
    s.max_order = e.ngram_order;
    s.n_heads = e.n_heads;
    buckets = e.hash_buckets;
    row_dim = e.embed_dim / e.n_heads;
    dtype = *base::ParseDType(e.lookup_dtype);
    if (e.pad_id >= 0) pad_token = static_cast<uint32_t>(e.pad_id);
  }
  if (r.preset == "engram-demo") {
    s.mode = hash::AddressingMode::kDeepSeek;
    s.seed = 0;
    s.layer_ids = {1, 15};
    s.max_order = 3;
    s.n_heads = 8;
    buckets = 5ull * 129280;
    row_dim = 512 / 8;
    pad_token = 2;
  } else if (r.preset == "deepseek-v4.1") {
    s.mode = hash::AddressingMode::kDeepSeek;
    s.seed = 0;
    s.layer_ids = {1, 14};
    s.max_order = 4;
    s.n_heads = 8;
    buckets = 16000000;
    row_dim = 256;
    dtype = base::DType::kF8E4M3;
    vocab = 99092;
    pad_token = 2;
  } else if (!r.preset.empty()) {
    ENGRAM_THROW(Code::kInvalidArgument,
                 "--layout " << r.preset << ": unknown preset; use engram-demo or deepseek-v4.1");
  }
  if (r.addressing) {
    if (*r.addressing == "native")
      s.mode = hash::AddressingMode::kNative;
    else if (*r.addressing == "deepseek")
      s.mode = hash::AddressingMode::kDeepSeek;
    else
      ENGRAM_THROW(Code::kInvalidArgument,
                   "--addressing " << *r.addressing << ": use native or deepseek");
  }
  if (r.seed) s.seed = *r.seed;
  if (r.layer_ids) s.layer_ids = *r.layer_ids;
  if (r.max_order) s.max_order = *r.max_order;
  if (r.n_heads) s.n_heads = *r.n_heads;
  if (r.buckets) buckets = *r.buckets;
  if (r.base_sizes) base_sizes = *r.base_sizes;
  if (r.row_dim) row_dim = *r.row_dim;
  if (r.dtype) dtype = *r.dtype;
  if (r.pad_token) pad_token = *r.pad_token;
  if (r.vocab_size) vocab = *r.vocab_size;

  if (s.mode == hash::AddressingMode::kNative) {
    if (!base::IsPowerOfTwo(buckets)) {
      uint64_t p = base::NearestPowerOfTwo(buckets);
      ENGRAM_THROW(Code::kInvalidArgument,
                   "buckets = " << buckets
                                << " is not a power of two, which native addressing requires; use "
                                << p << " (2^" << base::Log2Floor(p)
                                << ") or --addressing deepseek");
    }
    s.log2_buckets = static_cast<uint32_t>(base::Log2Floor(buckets));
  } else {
    s.base_sizes = base_sizes.empty() ? std::vector<uint64_t>{buckets} : base_sizes;
  }

  std::vector<uint32_t> map;
  uint64_t fingerprint = 0;
  if (!r.tokenizer_path.empty()) {
    const CanonInfo& ci = CanonicalInfoFor(r.tokenizer_path);
    map = ci.map;
    fingerprint = ci.fingerprint;
    s.canonical_vocab = ci.canonical_vocab;
    ENGRAM_CHECK(!vocab || *vocab == ci.canonical_vocab || r.vocab_size.has_value() == false,
                 Code::kInvalidArgument,
                 "--vocab-size " << *vocab << " disagrees with the tokenizer's "
                                 << ci.canonical_vocab << " canonical ids; drop --vocab-size");
  } else {
    ENGRAM_CHECK(vocab.has_value(), Code::kInvalidArgument,
                 "the canonical vocabulary size is unknown; give --tokenizer tokenizer.json (or "
                 "[model] tokenizer "
                 "in the config) or --vocab-size N for pre-tokenized ids");
    s.canonical_vocab = *vocab;
  }
  uint32_t pad = 0;
  if (pad_token) {
    if (!map.empty()) {
      ENGRAM_CHECK(
          *pad_token < map.size(), Code::kInvalidArgument,
          "pad token id " << *pad_token << " is outside the tokenizer's " << map.size() << " ids");
      pad = map[*pad_token];
    } else {
      pad = *pad_token;
    }
  }
  s.pad_id = pad;
  return MakeLayout(std::move(s), row_dim, dtype, std::move(map), fingerprint);
}

}  // namespace engram::format

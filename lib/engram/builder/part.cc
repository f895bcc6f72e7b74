// Part header codec.
#include "engram/builder/part.h"

#include <cstring>

#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/builder/zstd_stream.h"

namespace engram::builder {

namespace {
base::Json LayoutJson(const format::Layout& l) {
  using base::Json;
  std::vector<Json> layers, bases;
  for (uint32_t id : l.spec.layer_ids) layers.push_back(Json::MakeNumber(id));
  for (uint64_t b : l.spec.base_sizes) bases.push_back(Json::MakeNumber(static_cast<int64_t>(b)));
  return Json::MakeObject({
      {"addressing", Json::MakeNumber(static_cast<int64_t>(l.spec.mode))},
      {"seed", Json::MakeString(std::to_string(l.spec.seed))},
      {"layer_ids", Json::MakeArray(layers)},
      {"max_order", Json::MakeNumber(l.spec.max_order)},
      {"n_heads", Json::MakeNumber(l.spec.n_heads)},
      {"pad_id", Json::MakeNumber(l.spec.pad_id)},
      {"canonical_vocab", Json::MakeNumber(l.spec.canonical_vocab)},
      {"log2_buckets", Json::MakeNumber(l.spec.log2_buckets)},
      {"base_sizes", Json::MakeArray(bases)},
      {"row_dim", Json::MakeNumber(l.row_dim)},
      {"dtype", Json::MakeNumber(static_cast<int64_t>(l.dtype))},
      {"tokenizer_fingerprint", Json::MakeString(std::to_string(l.tokenizer_fingerprint))},
  });
}
}  // namespace

std::string EncodePartHeader(const PartHeader& h) {
  using base::Json;
  std::vector<Json::Member> m = {{"mode", Json::MakeString(h.mode)},
                                 {"shard_index", Json::MakeNumber(h.shard_index)},
                                 {"shard_count", Json::MakeNumber(h.shard_count)}};
  if (h.shards.size() > 1) {  // a part merge --partial wrote
    std::vector<Json> shards;
    for (uint32_t k : h.shards) shards.push_back(Json::MakeNumber(k));
    m.emplace_back("shards", Json::MakeArray(std::move(shards)));
  }
  m.emplace_back("tokens", Json::MakeNumber(static_cast<int64_t>(h.tokens)));
  m.emplace_back("documents", Json::MakeNumber(static_cast<int64_t>(h.documents)));
  m.emplace_back("options", h.options);
  m.emplace_back("layout", LayoutJson(h.layout));
  std::string text = Json::MakeObject(std::move(m)).Dump();
  std::string out(kPartMagic, 8);
  uint32_t len = static_cast<uint32_t>(text.size());
  out.append(reinterpret_cast<const char*>(&len), 4);
  out += text;
  uint32_t cm = static_cast<uint32_t>(h.layout.canon_map.size());
  out.append(reinterpret_cast<const char*>(&cm), 4);
  out.append(reinterpret_cast<const char*>(h.layout.canon_map.data()), cm * 4);
  return out;
}

PartHeader ReadPartHeader(ZstdReader& r) {
  char magic[8];
  r.ReadExact(magic, 8);
  ENGRAM_CHECK(
      std::memcmp(magic, kPartMagic, 8) == 0, Code::kCorrupt,
      r.path() << ": not a partial build summary (written by 'engramctl build --shard I/N')");
  uint32_t len;
  r.ReadExact(&len, 4);
  ENGRAM_CHECK(len < (64u << 20), Code::kCorrupt, r.path() << ": part header too large");
  std::string text(len, '\0');
  r.ReadExact(text.data(), len);
  base::Json j = base::Json::Parse(text, r.path() + " header", 16);
  uint32_t cm;
  r.ReadExact(&cm, 4);
  ENGRAM_CHECK(cm < (1u << 28), Code::kCorrupt, r.path() << ": canonical map too large");
  std::vector<uint32_t> canon(cm);
  r.ReadExact(canon.data(), cm * 4ull);
  PartHeader h;
  auto need = [&](const base::Json* v, const char* what) -> const base::Json& {
    ENGRAM_CHECK(v != nullptr, Code::kCorrupt, r.path() << ": part header lacks " << what);
    return *v;
  };
  h.mode = need(j.Find("mode"), "mode").as_string();
  h.shard_index =
      static_cast<uint32_t>(need(j.Find("shard_index"), "shard_index").as_uint64().value_or(0));
  h.shard_count =
      static_cast<uint32_t>(need(j.Find("shard_count"), "shard_count").as_uint64().value_or(0));
  h.tokens = need(j.Find("tokens"), "tokens").as_uint64().value_or(0);
  h.documents = need(j.Find("documents"), "documents").as_uint64().value_or(0);
  h.options = need(j.Find("options"), "options");
  const base::Json& l = need(j.Find("layout"), "layout");
  hash::AddressSpec s;
  s.mode = static_cast<hash::AddressingMode>(*need(l.Find("addressing"), "addressing").as_uint64());
  s.seed = std::stoull(need(l.Find("seed"), "seed").as_string());
  for (const auto& x : need(l.Find("layer_ids"), "layer_ids").items())
    s.layer_ids.push_back(static_cast<uint32_t>(*x.as_uint64()));
  s.max_order = static_cast<uint32_t>(*need(l.Find("max_order"), "max_order").as_uint64());
  s.n_heads = static_cast<uint32_t>(*need(l.Find("n_heads"), "n_heads").as_uint64());
  s.pad_id = static_cast<uint32_t>(*need(l.Find("pad_id"), "pad_id").as_uint64());
  s.canonical_vocab =
      static_cast<uint32_t>(*need(l.Find("canonical_vocab"), "canonical_vocab").as_uint64());
  s.log2_buckets = static_cast<uint32_t>(*need(l.Find("log2_buckets"), "log2_buckets").as_uint64());
  for (const auto& x : need(l.Find("base_sizes"), "base_sizes").items())
    s.base_sizes.push_back(*x.as_uint64());
  uint32_t row_dim = static_cast<uint32_t>(*need(l.Find("row_dim"), "row_dim").as_uint64());
  auto dtype = static_cast<base::DType>(*need(l.Find("dtype"), "dtype").as_uint64());
  uint64_t fp =
      std::stoull(need(l.Find("tokenizer_fingerprint"), "tokenizer_fingerprint").as_string());
  ENGRAM_CHECK(h.shard_count >= 1 && h.shard_index < h.shard_count, Code::kCorrupt,
               r.path() << ": bad shard numbers");
  if (const base::Json* sh = j.Find("shards")) {
    ENGRAM_CHECK(sh->is_array() && !sh->items().empty(), Code::kCorrupt,
                 r.path() << ": bad shard list");
    for (const auto& x : sh->items()) {
      auto k = x.as_uint64();
      ENGRAM_CHECK(k && *k < h.shard_count, Code::kCorrupt, r.path() << ": bad shard list");
      h.shards.push_back(static_cast<uint32_t>(*k));
    }
  } else {
    h.shards = {h.shard_index};
  }
  h.layout = format::MakeLayout(std::move(s), row_dim, dtype, std::move(canon), fp);
  return h;
}

std::string DescribePartMismatch(const PartHeader& a, const PartHeader& b) {
  if (a.mode != b.mode) return "owner modes differ (" + a.mode + " vs " + b.mode + ")";
  if (a.shard_count != b.shard_count)
    return "shard counts differ (" + std::to_string(a.shard_count) + " vs " +
           std::to_string(b.shard_count) + ")";
  if (a.options.Dump() != b.options.Dump()) return "build options differ";
  if (format::EncodeLayoutSection(a.layout) != format::EncodeLayoutSection(b.layout) ||
      a.layout.canon_map != b.layout.canon_map || a.layout.row_dim != b.layout.row_dim ||
      a.layout.dtype != b.layout.dtype ||
      a.layout.tokenizer_fingerprint != b.layout.tokenizer_fingerprint ||
      a.layout.spec.pad_id != b.layout.spec.pad_id)
    return "layouts differ";
  return {};
}

}  // namespace engram::builder

// config.toml loading: toml++ parse, key registry, per-key validation, notes and secrets rules.
#include "engram/config/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "engram/base/checked.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/text.h"

namespace engram::config {
namespace {

enum class Kind { kString, kBool, kInt, kFloat, kIntArray };

struct KeyDef {
  const char* key;
  Kind kind;
  // Non-null for keys accepted with no effect in this program: the note shown to the user.
  const char* note;
};

// Every known key, in the order of schemas/config.md.
const KeyDef kKeys[] = {
    {"model.name", Kind::kString, nullptr},
    {"model.dtype", Kind::kString, nullptr},
    {"model.device", Kind::kString, nullptr},
    {"model.trust_remote_code", Kind::kBool,
     "accepted and ignored: engramctl runs no Python or remote code, so there is nothing to trust"},
    {"model.path", Kind::kString, nullptr},
    {"model.tokenizer", Kind::kString, nullptr},
    {"moe.num_experts", Kind::kInt, nullptr},
    {"moe.top_k", Kind::kInt, nullptr},
    {"moe.expert_parallel", Kind::kBool,
     "accepted and ignored: engramctl run is a single-process runner; experts are never sharded"},
    {"moe.router_jitter", Kind::kFloat,
     "accepted and ignored: router jitter is training-time noise and inference never applies it"},
    {"engram.enable", Kind::kBool, nullptr},
    {"engram.ngram_order", Kind::kInt, nullptr},
    {"engram.hash_buckets", Kind::kInt, nullptr},
    {"engram.embed_dim", Kind::kInt, nullptr},
    {"engram.offload_to_host", Kind::kBool, nullptr},
    {"engram.host_memory_limit_gb", Kind::kFloat, nullptr},
    {"engram.deterministic_addressing", Kind::kBool, nullptr},
    {"engram.lookup_dtype", Kind::kString, nullptr},
    {"engram.layer_ids", Kind::kIntArray, nullptr},
    {"engram.n_heads", Kind::kInt, nullptr},
    {"engram.addressing", Kind::kString, nullptr},
    {"engram.seed", Kind::kInt, nullptr},
    {"engram.pad_id", Kind::kInt, nullptr},
    {"engram.kernel_size", Kind::kInt, nullptr},
    {"engram.table.path", Kind::kString, nullptr},
    {"engram.table.mmap", Kind::kBool, nullptr},
    {"engram.table.prefetch", Kind::kBool, nullptr},
    {"inference.max_batch_size", Kind::kInt, nullptr},
    {"inference.kv_cache_dtype", Kind::kString, nullptr},
    {"inference.gpu_memory_utilization", Kind::kFloat, nullptr},
    {"api.base_url", Kind::kString, nullptr},
    {"api.api_key_env", Kind::kString, nullptr},
    {"api.timeout", Kind::kFloat, nullptr},
};

const std::set<std::string> kSections = {"model",        "moe",       "engram",
                                         "engram.table", "inference", "api"};
// Keys that would hold a secret literally; always refused, never echoed.
const std::set<std::string> kSecretKeys = {"api.api_key", "api.key",      "api.token",
                                           "api.secret",  "api.password", "api.bearer_token"};

const KeyDef* FindKey(const std::string& key) {
  for (const auto& k : kKeys)
    if (key == k.key) return &k;
  return nullptr;
}

std::string Nearest(const std::string& key) {
  std::string best;
  size_t best_d = SIZE_MAX;
  std::string leaf = key.substr(key.find_last_of('.') + 1);
  for (const auto& k : kKeys) {
    std::string kk = k.key;
    std::string kleaf = kk.substr(kk.find_last_of('.') + 1);
    size_t d = std::min(base::EditDistance(key, kk), base::EditDistance(leaf, kleaf) + 1);
    if (d < best_d) {
      best_d = d;
      best = kk;
    }
  }
  if (best_d <= std::max<size_t>(3, leaf.size() / 2)) return best;
  return {};
}

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "true or false";
    case Kind::kInt:
      return "an integer";
    case Kind::kFloat:
      return "a number";
    case Kind::kIntArray:
      return "an array of integers";
  }
  return "?";
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

class Loader {
 public:
  Loader(std::string name, const EnvLookup& env) : name_(std::move(name)), env_(env) {
    cfg_.source_path = name_;
  }

  Config Run(const std::string& text) {
    toml::table root;
    try {
      root = toml::parse(text, name_);
    } catch (const toml::parse_error& e) {
      const auto& src = e.source();
      ENGRAM_THROW(Code::kConfig, name_ << ":" << src.begin.line << ":" << src.begin.column << ": "
                                        << e.description() << "; fix the TOML syntax there");
    }
    Walk(root, "");
    if (problems_.empty()) Extract();
    if (!problems_.empty()) {
      std::ostringstream os;
      for (size_t i = 0; i < problems_.size(); ++i) os << (i ? "\n" : "") << problems_[i];
      ENGRAM_THROW(Code::kConfig, os.str());
    }
    if (auto p = env_("ENGRAM_TABLE_PATH"); p && !p->empty()) {
      cfg_.table.path = *p;
      cfg_.table_path_from_env = true;
    }
    return std::move(cfg_);
  }

 private:
  void Problem(const std::string& key, int line, const std::string& what) {
    std::ostringstream os;
    os << name_ << ":" << line << ": " << key << ": " << what;
    problems_.push_back(os.str());
  }

  void Walk(const toml::table& t, const std::string& prefix) {
    for (auto&& [k, v] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      int line = static_cast<int>(v.source().begin.line);
      if (line == 0) line = static_cast<int>(k.source().begin.line);
      if (const toml::table* sub = v.as_table()) {
        if (kSections.count(key)) {
          Walk(*sub, key);
        } else {
          std::string sect;
          size_t best = 3;
          for (const auto& s : kSections)
            if (size_t d = base::EditDistance(s, key); d < best) {
              best = d;
              sect = s;
            }
          Problem(key, line,
                  "unknown section [" + key + "]" +
                      (sect.empty()
                           ? std::string(
                                 "; sections are model, moe, engram, engram.table, inference, api")
                           : "; did you mean [" + sect + "]?"));
        }
        continue;
      }
      if (kSecretKeys.count(key)) {
        Problem(key, line,
                "a literal API key in the config file is refused (the value is not shown); set "
                "api.api_key_env to the name of an environment variable and export the key there");
        continue;
      }
      const KeyDef* def = FindKey(key);
      if (!def) {
        if (prefix.empty()) {
          Problem(key, line,
                  "keys must sit in a section; sections are model, moe, engram, engram.table, "
                  "inference, api");
        } else {
          std::string near = Nearest(key);
          Problem(key, line,
                  "unknown key" + (near.empty()
                                       ? std::string("; see schemas/config.md for the known keys")
                                       : "; did you mean " + near + "?"));
        }
        continue;
      }
      nodes_[key] = &v;
      cfg_.key_lines[key] = line;
      bool ok = false;
      switch (def->kind) {
        case Kind::kString:
          ok = v.is_string();
          break;
        case Kind::kBool:
          ok = v.is_boolean();
          break;
        case Kind::kInt:
          ok = v.is_integer();
          break;
        case Kind::kFloat:
          ok = v.is_integer() || v.is_floating_point();
          break;
        case Kind::kIntArray: {
          const toml::array* a = v.as_array();
          ok = a != nullptr;
          if (a)
            for (auto&& e : *a) ok = ok && e.is_integer();
          break;
        }
      }
      if (!ok) {
        Problem(key, line, std::string("must be ") + KindName(def->kind));
        nodes_.erase(key);
        continue;
      }
      if (def->note) cfg_.notes.push_back({key, line, def->note});
    }
  }

  int Line(const std::string& key) const {
    auto it = cfg_.key_lines.find(key);
    return it == cfg_.key_lines.end() ? 0 : it->second;
  }

  void Str(const std::string& key, std::string* out) {
    auto it = nodes_.find(key);
    if (it == nodes_.end()) return;
    std::string v = *it->second->value<std::string>();
    // TOML allows "\u0000"; every use of these strings (paths, names, URLs) would cut it there.
    if (v.find('\0') != std::string::npos) {
      Problem(key, Line(key), "holds a NUL character (\\u0000); remove it");
      return;
    }
    *out = std::move(v);
  }
  void Bool(const std::string& key, bool* out) {
    if (auto it = nodes_.find(key); it != nodes_.end()) *out = *it->second->value<bool>();
  }
  void Float(const std::string& key, double* out) {
    if (auto it = nodes_.find(key); it != nodes_.end()) *out = *it->second->value<double>();
  }
  // Integer in [lo, hi]; a problem otherwise.
  template <typename T>
  void Int(const std::string& key, T* out, int64_t lo, int64_t hi, const std::string& fix) {
    auto it = nodes_.find(key);
    if (it == nodes_.end()) return;
    int64_t v = *it->second->value<int64_t>();
    if (v < lo || v > hi) {
      Problem(key, Line(key), "= " + std::to_string(v) + " is out of range; " + fix);
      return;
    }
    *out = static_cast<T>(v);
  }
  void OneOf(const std::string& key, const std::string& value,
             std::initializer_list<const char*> allowed, const std::string& extra = "") {
    if (!cfg_.Has(key)) return;
    for (const char* a : allowed)
      if (value == a) return;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    Problem(key, Line(key), "= \"" + value + "\" is not one of: " + list + extra);
  }

  void Extract() {
    Config& c = cfg_;
    Str("model.name", &c.model.name);
    Str("model.dtype", &c.model.dtype);
    OneOf("model.dtype", c.model.dtype, {"float32", "f32", "bfloat16", "bf16"},
          " (libtorch on CPU has no float16 matmul; use bfloat16 or float32)");
    Str("model.device", &c.model.device);
    if (c.Has("model.device")) {
      const std::string& d = c.model.device;
      bool ok = d == "cpu" || d == "cuda";
      if (d.rfind("cuda:", 0) == 0 && d.size() > 5)
        ok = std::all_of(d.begin() + 5, d.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (!ok)
        Problem("model.device", Line("model.device"), "= \"" + d + "\"; use \"cpu\" or \"cuda:N\"");
    }
    Bool("model.trust_remote_code", &c.model.trust_remote_code);
    if (!c.model.trust_remote_code)  // false asks for nothing: no note to give
      std::erase_if(c.notes, [](const Note& n) { return n.key == "model.trust_remote_code"; });
    Str("model.path", &c.model.path);
    Str("model.tokenizer", &c.model.tokenizer);

    int64_t ne = 0, tk = 0;
    if (c.Has("moe.num_experts")) {
      Int("moe.num_experts", &ne, 1, 1 << 16, "use a count >= 1");
      c.moe.num_experts = ne;
    }
    if (c.Has("moe.top_k")) {
      Int("moe.top_k", &tk, 1, 1 << 16, "use a count >= 1");
      c.moe.top_k = tk;
      if (c.moe.num_experts && tk > *c.moe.num_experts)
        Problem("moe.top_k", Line("moe.top_k"),
                "= " + std::to_string(tk) + " exceeds moe.num_experts = " +
                    std::to_string(*c.moe.num_experts) + "; lower it");
    }
    Bool("moe.expert_parallel", &c.moe.expert_parallel);
    Float("moe.router_jitter", &c.moe.router_jitter);

    Bool("engram.enable", &c.engram.enable);
    Int("engram.ngram_order", &c.engram.ngram_order, 2, 8, "use 2..8 (orders 2..N are hashed)");
    Int("engram.hash_buckets", &c.engram.hash_buckets, 2, int64_t{1} << 40, "use 2..2^40 buckets");
    Int("engram.embed_dim", &c.engram.embed_dim, 1, 1 << 20, "use a width >= 1");
    Bool("engram.offload_to_host", &c.engram.offload_to_host);
    Float("engram.host_memory_limit_gb", &c.engram.host_memory_limit_gb);
    if (c.engram.host_memory_limit_gb < 0 || !std::isfinite(c.engram.host_memory_limit_gb))
      Problem("engram.host_memory_limit_gb", Line("engram.host_memory_limit_gb"),
              "must be >= 0 (0 means no limit beyond available memory)");
    Bool("engram.deterministic_addressing", &c.engram.deterministic_addressing);
    Str("engram.lookup_dtype", &c.engram.lookup_dtype);
    OneOf("engram.lookup_dtype", c.engram.lookup_dtype,
          {"float32", "f32", "bfloat16", "bf16", "float16", "f16", "float8_e4m3", "fp8-e4m3", "fp8",
           "int8", "int4"});
    if (auto it = nodes_.find("engram.layer_ids"); it != nodes_.end()) {
      c.engram.layer_ids.clear();
      std::set<int64_t> seen;
      for (auto&& e : *it->second->as_array()) {
        int64_t v = *e.value<int64_t>();
        if (v < 0 || v > 100000) {
          Problem("engram.layer_ids", Line("engram.layer_ids"),
                  "layer id " + std::to_string(v) + " is out of range; use 0..100000");
          continue;
        }
        if (!seen.insert(v).second)
          Problem("engram.layer_ids", Line("engram.layer_ids"),
                  "layer id " + std::to_string(v) + " appears twice; list each layer once");
        c.engram.layer_ids.push_back(static_cast<uint32_t>(v));
      }
      if (c.engram.layer_ids.empty())
        Problem("engram.layer_ids", Line("engram.layer_ids"),
                "is empty; name at least one layer, e.g. [1, 15]");
    }
    Int("engram.n_heads", &c.engram.n_heads, 1, 64, "use 1..64 heads per order");
    Str("engram.addressing", &c.engram.addressing);
    OneOf("engram.addressing", c.engram.addressing, {"native", "deepseek"});
    Int("engram.seed", &c.engram.seed, 0, INT64_MAX, "use a non-negative seed");
    Int("engram.pad_id", &c.engram.pad_id, 0, INT32_MAX, "use a token id >= 0");
    Int("engram.kernel_size", &c.engram.kernel_size, 0, 16, "use 0 (no short conv) or 1..16");

    Str("engram.table.path", &c.table.path);
    Bool("engram.table.mmap", &c.table.mmap);
    Bool("engram.table.prefetch", &c.table.prefetch);

    Int("inference.max_batch_size", &c.inference.max_batch_size, 1, 4096, "use 1..4096");
    Str("inference.kv_cache_dtype", &c.inference.kv_cache_dtype);
    OneOf("inference.kv_cache_dtype", c.inference.kv_cache_dtype,
          {"auto", "f32", "float32", "bf16", "bfloat16", "fp8", "fp8_e4m3"});
    Float("inference.gpu_memory_utilization", &c.inference.gpu_memory_utilization);
    if (!(c.inference.gpu_memory_utilization > 0 && c.inference.gpu_memory_utilization <= 1))
      Problem("inference.gpu_memory_utilization", Line("inference.gpu_memory_utilization"),
              "must be in (0, 1], a fraction of GPU memory");
    if (c.Has("inference.gpu_memory_utilization") && c.model.device.rfind("cuda", 0) != 0)
      c.notes.push_back(
          {"inference.gpu_memory_utilization", Line("inference.gpu_memory_utilization"),
           "applies to CUDA devices only; model.device is \"" + c.model.device + "\""});

    Str("api.base_url", &c.api.base_url);
    Str("api.api_key_env", &c.api.api_key_env);
    if (c.Has("api.api_key_env") && !IsEnvName(c.api.api_key_env)) {
      Problem("api.api_key_env", Line("api.api_key_env"),
              "must name an environment variable (letters, digits, _), e.g. \"TAOTOKEN_API_KEY\"; "
              "the value given is not a variable name and is not shown, in case it is a key");
      c.api.api_key_env.clear();
    }
    Float("api.timeout", &c.api.timeout);
    if (!(c.api.timeout > 0)) Problem("api.timeout", Line("api.timeout"), "must be > 0 seconds");
  }

  std::string name_;
  const EnvLookup& env_;
  Config cfg_;
  std::map<std::string, const toml::node*> nodes_;
  std::vector<std::string> problems_;
};

}  // namespace

std::string Config::Where(const std::string& key) const {
  auto it = key_lines.find(key);
  if (it == key_lines.end() || source_path.empty()) return key;
  return source_path + ":" + std::to_string(it->second) + ": " + key;
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

Config Parse(const std::string& text, const std::string& name, const EnvLookup& env) {
  return Loader(name, env).Run(text);
}

Config Load(const std::string& path, const EnvLookup& env) {
  std::string text;
  try {
    text = [&] {
      base::RequireNotPipe(path);
      FILE* f = std::fopen(path.c_str(), "rb");
      ENGRAM_CHECK(f != nullptr, Code::kConfig,
                   path << ": cannot open the config file; check the path given to --config");
      std::string s;
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        s.append(buf, n);
        if (s.size() > (16u << 20)) {
          std::fclose(f);
          ENGRAM_THROW(Code::kConfig, path << ": larger than 16 MiB; this is not a config file");
        }
      }
      std::fclose(f);
      return s;
    }();
  } catch (const Error&) {
    throw;
  }
  Config c = Parse(text, path, env);
  // Relative paths inside the file are the file's own: resolved against its folder, so a service
  // started from / or by cron reads what the config's author meant (issue 32). Lexically
  // normalised: examples/demo/../../build/demo/model reads build/demo/model in messages.
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](std::string* p) {
    if (p->empty() || dir.empty() || std::filesystem::path(*p).is_absolute()) return;
    std::string r = (dir / *p).lexically_normal().string();
    if (r.size() > 1 && r.back() == '/') r.pop_back();
    *p = r.empty() ? "." : r;
  };
  resolve(&c.model.path);
  resolve(&c.model.tokenizer);
  if (!c.table_path_from_env) resolve(&c.table.path);
  return c;
}

std::vector<std::string> LayoutProblems(const Config& c) {
  std::vector<std::string> out;
  const EngramSection& e = c.engram;
  auto where = [&](const std::string& key) { return c.Where(key); };
  if (e.addressing == "native" && (e.hash_buckets & (e.hash_buckets - 1)) != 0) {
    uint64_t p = base::NearestPowerOfTwo(e.hash_buckets);
    out.push_back(where("engram.hash_buckets") + " = " + std::to_string(e.hash_buckets) +
                  " is not a power of two, which native addressing requires (buckets are masked, "
                  "never taken modulo); use " +
                  std::to_string(p) + " (2^" + std::to_string(base::Log2Floor(p)) +
                  "), or set engram.addressing = \"deepseek\" for prime-sized tables");
  }
  if (e.embed_dim % e.n_heads != 0) {
    out.push_back(where("engram.embed_dim") + " = " + std::to_string(e.embed_dim) +
                  " is not divisible by engram.n_heads = " + std::to_string(e.n_heads) +
                  "; each head holds embed_dim / n_heads values, so choose a multiple of n_heads");
  }
  if (e.pad_id < -1) out.push_back(where("engram.pad_id") + " must be >= 0");
  return out;
}

const std::vector<std::string>& KnownKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> v;
    for (const auto& k : kKeys) v.push_back(k.key);
    return v;
  }();
  return keys;
}

std::optional<std::string> ResolveApiKey(const Config& c, const std::string& fix,
                                         const EnvLookup& env) {
  if (c.api.api_key_env.empty()) return std::nullopt;
  std::optional<std::string> key = env(c.api.api_key_env);
  ENGRAM_CHECK(key && !key->empty(), Code::kConfig,
               c.Where("api.api_key_env")
                   << " names $" << c.api.api_key_env << ", which is "
                   << (key ? "empty" : "not set") << "; export " << c.api.api_key_env
                   << "=<key> (the exported name must match)" << (fix.empty() ? "" : ", ") << fix);
  return key;
}

std::string MaskSecret(const std::string& secret) {
  std::string head = secret.substr(0, std::min<size_t>(4, secret.size() / 4));
  return head + "…(" + std::to_string(secret.size()) + " chars)";
}

std::string ToToml(const Config& c) {
  std::ostringstream os;
  auto q = [](const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') out.push_back('\\');
      out.push_back(ch);
    }
    return out + "\"";
  };
  auto b = [](bool v) { return v ? "true" : "false"; };
  os << "[model]\n"
     << "name = " << q(c.model.name) << "\n"
     << "dtype = " << q(c.model.dtype) << "\n"
     << "device = " << q(c.model.device) << "\n"
     << "trust_remote_code = " << b(c.model.trust_remote_code) << "\n"
     << "path = " << q(c.model.path) << "\n"
     << "tokenizer = " << q(c.model.tokenizer) << "\n\n";
  os << "[moe]\n";
  if (c.moe.num_experts) os << "num_experts = " << *c.moe.num_experts << "\n";
  if (c.moe.top_k) os << "top_k = " << *c.moe.top_k << "\n";
  os << "expert_parallel = " << b(c.moe.expert_parallel) << "\n"
     << "router_jitter = " << c.moe.router_jitter << "\n\n";
  const EngramSection& e = c.engram;
  os << "[engram]\n"
     << "enable = " << b(e.enable) << "\n"
     << "ngram_order = " << e.ngram_order << "\n"
     << "hash_buckets = " << e.hash_buckets << "\n"
     << "embed_dim = " << e.embed_dim << "\n"
     << "offload_to_host = " << b(e.offload_to_host) << "\n"
     << "host_memory_limit_gb = " << e.host_memory_limit_gb << "\n"
     << "deterministic_addressing = " << b(e.deterministic_addressing) << "\n"
     << "lookup_dtype = " << q(e.lookup_dtype) << "\n"
     << "layer_ids = [";
  for (size_t i = 0; i < e.layer_ids.size(); ++i) os << (i ? ", " : "") << e.layer_ids[i];
  os << "]\n"
     << "n_heads = " << e.n_heads << "\n"
     << "addressing = " << q(e.addressing) << "\n"
     << "seed = " << e.seed << "\n";
  if (e.pad_id >= 0) os << "pad_id = " << e.pad_id << "\n";
  os << "kernel_size = " << e.kernel_size << "\n\n"
     << "[engram.table]\n"
     << "path = " << q(c.table.path) << (c.table_path_from_env ? "  # from ENGRAM_TABLE_PATH" : "")
     << "\n"
     << "mmap = " << b(c.table.mmap) << "\n"
     << "prefetch = " << b(c.table.prefetch) << "\n\n"
     << "[inference]\n"
     << "max_batch_size = " << c.inference.max_batch_size << "\n"
     << "kv_cache_dtype = " << q(c.inference.kv_cache_dtype) << "\n"
     << "gpu_memory_utilization = " << c.inference.gpu_memory_utilization << "\n\n"
     << "[api]\n"
     << "base_url = " << q(c.api.base_url) << "\n"
     << "api_key_env = " << q(c.api.api_key_env) << "\n"
     << "timeout = " << c.api.timeout << "\n";
  return os.str();
}

}  // namespace engram::config

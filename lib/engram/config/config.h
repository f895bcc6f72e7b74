// The user's config.toml as validated plain structs (schemas/config.md is the key reference).
// The only includer of toml++.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace engram::config {

struct ModelSection {
  std::string name;                // display name only
  std::string dtype = "float32";   // compute dtype: float32 | bfloat16
  std::string device = "cpu";      // cpu | cuda:N
  bool trust_remote_code = false;  // accepted, no meaning here (note)
  std::string path;       // model directory (config.json, model.safetensors, tokenizer.json)
  std::string tokenizer;  // tokenizer.json; default <path>/tokenizer.json
};

struct MoeSection {
  std::optional<int64_t> num_experts;  // checked against the model's config.json
  std::optional<int64_t> top_k;
  bool expert_parallel = false;  // accepted, no meaning for a single-process runner (note)
  double router_jitter = 0;      // accepted, training-time only (note)
};

struct EngramSection {
  bool enable = true;
  uint32_t ngram_order = 3;          // N: orders 2..N
  uint64_t hash_buckets = 1u << 20;  // native: buckets per sub-table (power of two);
                                     // deepseek: prime search base per order
  uint32_t embed_dim = 512;          // memory width per order; row width = embed_dim / n_heads
  bool offload_to_host = true;
  double host_memory_limit_gb = 0;  // 0 = no limit beyond available memory
  bool deterministic_addressing = true;
  std::string lookup_dtype =
      "float32";  // storage dtype of rows: float32|bfloat16|float16|float8_e4m3
  // Keys a real run needs beyond the skeleton:
  std::vector<uint32_t> layer_ids = {1};
  uint32_t n_heads = 8;
  std::string addressing = "native";  // native | deepseek
  uint64_t seed = 0;
  int64_t pad_id = -1;       // tokenizer id of the pad token; -1 = none given (use 0)
  uint32_t kernel_size = 4;  // short conv kernel; 0 = no conv (DeepSeek-V4.1 form)
};

struct TableSection {
  std::string path;
  bool mmap = true;
  bool prefetch = false;
};

struct InferenceSection {
  uint32_t max_batch_size = 1;
  std::string kv_cache_dtype = "auto";  // auto | f32 | bf16 | fp8
  double gpu_memory_utilization = 0.9;
};

struct ApiSection {
  std::string base_url;
  std::string api_key_env;
  double timeout = 120;
};

// One accepted key that has no effect in this program, with the reason.
struct Note {
  std::string key;
  int line = 0;
  std::string text;
};

struct Config {
  std::string source_path;  // "" for a default-constructed config
  ModelSection model;
  MoeSection moe;
  EngramSection engram;
  TableSection table;
  InferenceSection inference;
  ApiSection api;
  std::vector<Note> notes;
  // Which keys the file set, with their 1-based line ("engram.hash_buckets" -> 12).
  std::map<std::string, int> key_lines;
  // Set when ENGRAM_TABLE_PATH replaced [engram.table] path.
  bool table_path_from_env = false;

  bool Has(const std::string& key) const { return key_lines.count(key) != 0; }
  // "config.toml:12: engram.hash_buckets" or "engram.hash_buckets" when not from a file.
  std::string Where(const std::string& key) const;
};

// Reads the environment (injectable for tests).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// Parses and validates a config file. Every problem becomes one line "file:line: key: problem;
// fix"; if there is any, throws Error(kConfig) whose message holds all lines. Unknown keys are
// problems (with the nearest known key suggested). Applies ENGRAM_TABLE_PATH.
// Layout checks that depend on the addressing mode (power-of-two buckets, heads dividing
// embed_dim) are not made here but by LayoutProblems(), when a command needs a layout.
Config Load(const std::string& path, const EnvLookup& env = ProcessEnv());
// Same for TOML text already in memory (`name` is used in messages).
Config Parse(const std::string& text, const std::string& name, const EnvLookup& env = ProcessEnv());

// Problems that make the [engram] section unusable as a table layout, one message per line
// (empty when fine). E.g. "config.toml:9: engram.hash_buckets = 2000000 is not a power of two,
// which native addressing requires; use 2097152 (2^21)".
std::vector<std::string> LayoutProblems(const Config& c);

// The effective configuration as TOML (for --print-config). Secrets are never included.
std::string ToToml(const Config& c);

// Every key this program knows, "section.key", in file order (for docs tests and suggestions).
const std::vector<std::string>& KnownKeys();

// The API key that [api] api_key_env names, read from that environment variable only (a key is
// never read from the file, never logged; see MaskSecret). nullopt when the config names no
// variable. Throws kConfig, naming the variable and the config line, when it names one that is
// unset or empty: "FILE:LINE: api.api_key_env names $VAR, which is not set (or is empty); export
// VAR=<key> (the exported name must match)" and then `fix`, what else the user may do.
std::optional<std::string> ResolveApiKey(const Config& c, const std::string& fix,
                                         const EnvLookup& env = ProcessEnv());
// "sk-a…(40 chars)": at most the first 4 characters and the length.
std::string MaskSecret(const std::string& secret);

}  // namespace engram::config

// config.toml: the user's skeleton loads as-is, every key is honoured or refused clearly.
#include "engram/config/config.h"

#include <doctest/doctest.h>

#include <string>

#include "engram/base/error.h"

using namespace engram;
using namespace engram::config;

namespace {
// DESIGN.md §4, as users have it.
const char* kSkeleton = R"([model]
name = "deepseek-engram-27b"
dtype = "bfloat16"
device = "cuda:0"
trust_remote_code = true

[moe]
num_experts = 64
top_k = 6
expert_parallel = false
router_jitter = 0.01

[engram]
enable = true
ngram_order = 5
hash_buckets = 2000000
embed_dim = 512
offload_to_host = true
host_memory_limit_gb = 48
deterministic_addressing = true
lookup_dtype = "float16"

[engram.table]
path = "./engram_weights/ngram_table_v3.bin"
mmap = true
prefetch = true

[inference]
max_batch_size = 8
kv_cache_dtype = "fp8"
gpu_memory_utilization = 0.85

[api]
base_url = "https://example.invalid/api"
api_key_env = "TAOTOKEN_API_KEY"
timeout = 120
)";

EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

std::string ErrorOf(const std::string& text) {
  try {
    Parse(text, "c.toml", NoEnv());
  } catch (const Error& e) {
    CHECK(e.code() == Code::kConfig);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the DESIGN skeleton loads as-is, with notes for keys that mean nothing here") {
  Config c = Parse(kSkeleton, "config.toml", NoEnv());
  CHECK(c.model.name == "deepseek-engram-27b");
  CHECK(c.moe.num_experts == 64);
  CHECK(c.engram.ngram_order == 5);
  CHECK(c.engram.hash_buckets == 2000000);
  CHECK(c.engram.host_memory_limit_gb == 48.0);
  CHECK(c.table.path == "./engram_weights/ngram_table_v3.bin");
  CHECK(c.inference.kv_cache_dtype == "fp8");
  CHECK(c.key_lines.at("engram.hash_buckets") == 16);
  std::string notes;
  for (const auto& n : c.notes) notes += n.key + ": " + n.text + "\n";
  CHECK(notes.find("model.trust_remote_code") != std::string::npos);
  CHECK(notes.find("moe.router_jitter") != std::string::npos);
  CHECK(notes.find("moe.expert_parallel") != std::string::npos);
  // [api] base_url and timeout are used (serve's client, run --remote): no note for them.
  CHECK(notes.find("api.base_url") == std::string::npos);
  CHECK(c.api.timeout == 120);
}

TEST_CASE("hash_buckets = 2000000 in native mode is refused with 2097152 suggested") {
  Config c = Parse(kSkeleton, "config.toml", NoEnv());
  auto p = LayoutProblems(c);
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("config.toml:16: engram.hash_buckets = 2000000 is not a power of two") !=
        std::string::npos);
  CHECK(p[0].find("use 2097152 (2^21)") != std::string::npos);
  std::string fixed = kSkeleton;
  fixed.replace(fixed.find("2000000"), 7, "2097152");
  CHECK(LayoutProblems(Parse(fixed, "config.toml", NoEnv())).empty());
  std::string deepseek = kSkeleton;
  deepseek.replace(deepseek.find("enable = true"), 13, "enable = true\naddressing = \"deepseek\"");
  CHECK(LayoutProblems(Parse(deepseek, "config.toml", NoEnv())).empty());
}

TEST_CASE("unknown keys are errors with the nearest key suggested, all at once, with lines") {
  std::string e = ErrorOf("[engram]\nngram_ordr = 3\nhash_bucket = 1024\n[modle]\nname = \"x\"\n");
  CHECK(e.find("c.toml:2: engram.ngram_ordr: unknown key; did you mean engram.ngram_order?") !=
        std::string::npos);
  CHECK(e.find("c.toml:3: engram.hash_bucket: unknown key; did you mean engram.hash_buckets?") !=
        std::string::npos);
  CHECK(e.find("unknown section [modle]; did you mean [model]?") != std::string::npos);
}

TEST_CASE("types, ranges and enumerations are validated with file:line") {
  std::string e = ErrorOf("[engram]\nngram_order = \"five\"\n");
  CHECK(e.find("c.toml:2: engram.ngram_order: must be an integer") != std::string::npos);
  e = ErrorOf("[engram]\nngram_order = 12\n");
  CHECK(e.find("c.toml:2: engram.ngram_order: = 12 is out of range") != std::string::npos);
  e = ErrorOf("[engram]\nlookup_dtype = \"int2\"\n");
  CHECK(e.find("is not one of") != std::string::npos);
  e = ErrorOf("[inference]\ngpu_memory_utilization = 1.5\n");
  CHECK(e.find("must be in (0, 1]") != std::string::npos);
  e = ErrorOf("[moe]\nnum_experts = 4\ntop_k = 6\n");
  CHECK(e.find("exceeds moe.num_experts") != std::string::npos);
  e = ErrorOf("[model]\ndevice = \"tpu\"\n");
  CHECK(e.find("use \"cpu\" or \"cuda:N\"") != std::string::npos);
  e = ErrorOf("[engram]\nlayer_ids = [1, 1]\n");
  CHECK(e.find("appears twice") != std::string::npos);
  e = ErrorOf("not toml at all [[[");
  CHECK(e.find("c.toml:1:") != std::string::npos);
}

TEST_CASE("secrets: a literal API key is refused and never echoed") {
  std::string e = ErrorOf("[api]\napi_key = \"sk-live-SECRET123456789\"\n");
  CHECK(e.find("literal API key") != std::string::npos);
  CHECK(e.find("SECRET") == std::string::npos);
  e = ErrorOf("[api]\napi_key_env = \"sk-live-SECRET123456789\"\n");
  CHECK(e.find("must name an environment variable") != std::string::npos);
  CHECK(e.find("SECRET") == std::string::npos);
  Config c = Parse("[api]\napi_key_env = \"MY_KEY\"\n", "c.toml",
                   [](const std::string& n) -> std::optional<std::string> {
                     if (n == "MY_KEY") return std::string("sk-abcdefghijklmnop");
                     return std::nullopt;
                   });
  CHECK(ToToml(c).find("sk-") == std::string::npos);
  CHECK(MaskSecret("sk-abcdefghijklmnop") == "sk-a…(19 chars)");
}

TEST_CASE("ENGRAM_TABLE_PATH overrides [engram.table] path") {
  Config c =
      Parse(kSkeleton, "config.toml", [](const std::string& n) -> std::optional<std::string> {
        if (n == "ENGRAM_TABLE_PATH") return std::string("/data/t.engram");
        return std::nullopt;
      });
  CHECK(c.table.path == "/data/t.engram");
  CHECK(c.table_path_from_env);
}

TEST_CASE("every known key is documented in schemas/config.md") {
  std::string doc;
  {
    FILE* f = std::fopen(ENGRAM_SOURCE_DIR "/schemas/config.md", "rb");
    REQUIRE(f != nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) doc.append(buf, n);
    std::fclose(f);
  }
  for (const std::string& k : KnownKeys()) {
    INFO(k);
    CHECK(doc.find("`" + k + "`") != std::string::npos);
  }
}

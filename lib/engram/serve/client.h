// The client side of [api]: `engramctl run --remote` sends a prompt as an OpenAI chat request to
// `serve` or any OpenAI-compatible server (cpp-httplib, nlohmann-json; schemas/http_api.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace engram::serve {

struct RemoteOptions {
  std::string base_url;  // http(s)://host[:port][/path]; "/v1/chat/completions" is appended
                         // ("/chat/completions" when the path already ends in /v1)
  std::optional<std::string> api_key;  // sent as "Authorization: Bearer <key>"; never logged
  std::string key_origin;  // for a 401 message: "$VAR (named by [api] api_key_env at file:line)"
  double timeout_s = 120;
  std::string prompt;
  int max_tokens = 64;
  double temperature = 0.8;
  int top_k = 40;
  double top_p = 0.95;
  uint64_t seed = 0;
};

struct RemoteReply {
  std::string text;
  std::string finish_reason;
  bool has_engram = false;  // the server is engramctl: the fields below are set
  uint64_t lookups = 0, hits = 0, prompt_lookups = 0, prompt_hits = 0, gen_lookups = 0,
           gen_hits = 0;
  uint64_t table_generation = 0;
};

// One chat request. Throws kIo on connection failures and HTTP errors; a 401 names where the key
// came from and that the exported variable's name must match the one [api] api_key_env names.
RemoteReply RemoteChat(const RemoteOptions& o);

}  // namespace engram::serve

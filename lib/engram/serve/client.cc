// `run --remote`: one OpenAI chat request over cpp-httplib, the reply and engramctl's hit rates.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "engram/base/error.h"
#include "engram/serve/api.h"

namespace engram::serve {

RemoteReply HttpRemoteChat(const RemoteOptions& o) {
  using nlohmann::json;
  const std::string& url = o.base_url;
  const size_t scheme_end = url.find("://");
  ENGRAM_CHECK(
      scheme_end != std::string::npos &&
          (url.compare(0, scheme_end, "http") == 0 || url.compare(0, scheme_end, "https") == 0),
      Code::kInvalidArgument, "remote URL \"" << url << "\" must start with http:// or https://");
  const size_t path_start = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_start);
  std::string path = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  path += path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0 ? "/chat/completions"
                                                                           : "/v1/chat/completions";

  httplib::Client cli(origin);
  const auto secs = static_cast<time_t>(o.timeout_s);
  const auto usecs = static_cast<time_t>((o.timeout_s - static_cast<double>(secs)) * 1e6);
  cli.set_connection_timeout(secs, usecs);
  cli.set_read_timeout(secs, usecs);
  cli.set_write_timeout(secs, usecs);
  httplib::Headers headers;
  if (o.api_key) headers.emplace("Authorization", "Bearer " + *o.api_key);
  json body = {{"messages", json::array({{{"role", "user"}, {"content", o.prompt}}})},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature},
               {"top_k", o.top_k},
               {"top_p", o.top_p},
               {"seed", o.seed}};
  auto res = cli.Post(path, headers, body.dump(), "application/json");
  ENGRAM_CHECK(res, Code::kIo,
               "cannot reach " << origin << path << ": " << httplib::to_string(res.error())
                               << "; is the server running (engramctl serve), and is the URL "
                                  "([api] base_url or --remote URL) right?");
  if (res->status == 401)
    ENGRAM_THROW(Code::kIo,
                 origin << path << " answered 401 Unauthorized: "
                        << (o.api_key ? "the key sent was read from " + o.key_origin +
                                            "; the server must have been started with the same "
                                            "key, and the exported variable's name must match "
                                            "the one api_key_env names"
                                      : "no key was sent (" + o.key_origin +
                                            "); set [api] api_key_env to the variable that holds "
                                            "the key and export it"));
  json j = json::parse(res->body, nullptr, false);
  if (res->status != 200) {
    std::string msg = res->body.substr(0, 300);
    if (!j.is_discarded() && j.contains("error") && j["error"].is_object())
      msg = j["error"].value("message", msg);
    ENGRAM_THROW(Code::kIo, origin << path << " answered " << res->status << ": " << msg);
  }
  ENGRAM_CHECK(!j.is_discarded() && j.contains("choices") && j["choices"].is_array() &&
                   !j["choices"].empty(),
               Code::kIo, origin << path << " answered 200 without an OpenAI chat completion body");
  RemoteReply r;
  try {
    const json& c = j["choices"][0];
    r.text = c.at("message").at("content").get<std::string>();
    if (c.contains("finish_reason") && c["finish_reason"].is_string())
      r.finish_reason = c["finish_reason"].get<std::string>();
    if (j.contains("engram") && j["engram"].is_object()) {
      const json& e = j["engram"];
      r.has_engram = true;
      r.lookups = e.at("lookups").get<uint64_t>();
      r.hits = e.at("hits").get<uint64_t>();
      r.prompt_lookups = e.at("prompt").at("lookups").get<uint64_t>();
      r.prompt_hits = e.at("prompt").at("hits").get<uint64_t>();
      r.gen_lookups = e.at("generated").at("lookups").get<uint64_t>();
      r.gen_hits = e.at("generated").at("hits").get<uint64_t>();
      r.table_generation = e.value("table_generation", uint64_t{0});
    }
  } catch (const json::exception& e) {
    ENGRAM_THROW(Code::kIo, origin << path << " answered an unexpected body: " << e.what());
  }
  return r;
}

}  // namespace engram::serve

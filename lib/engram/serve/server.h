// `engramctl serve`: an OpenAI-compatible HTTP endpoint over a model::Session
// (schemas/http_api.md). The only includer of cpp-httplib. Endpoints: GET /health, GET /v1/models,
// POST /v1/completions, POST /v1/chat/completions (stream or not), GET /metrics (Prometheus text),
// GET / (status page).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engram/base/reporter.h"
#include "engram/model/session.h"

namespace engram::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = any free port (Start returns it)
  // The bearer key every endpoint but /health and /v1/models requires; nullopt = open. Never
  // logged or echoed.
  std::optional<std::string> api_key;
  std::string api_key_env;  // the variable it came from (named in 401 bodies)
  // Requests waiting for a batch slot; beyond it, 503 with Retry-After. 0 = 4 x max_batch.
  size_t queue_capacity = 0;
  int max_batch = 1;        // requests generated together (the session's max_batch)
  std::string config_path;  // shown on the status page
};

// Thread-safe: handlers run on httplib's pool, generation on one scheduler thread.
class Server {
 public:
  // The reporter must be thread-safe and outlive the server.
  Server(ServeOptions opts, base::Reporter& rep);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts answering on a background thread (/health says 503 "Loading model" until
  // SetSession). Returns the bound port. Throws kIo when the address cannot be bound.
  int Start();
  // Hands over the loaded session: generation requests are served from now on.
  void SetSession(std::unique_ptr<model::Session> session);
  // Graceful stop: new generation requests get 503, queued and running ones finish and are
  // delivered, then the listener closes. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The documented plain chat template used for models without one (the demo model is a base
// model): the messages' contents joined by "\n", roles dropped, so a single user message is
// continued exactly as `run` continues that text.
inline constexpr const char* kPlainChatTemplate = "plain: message contents joined by \\n";

}  // namespace engram::serve

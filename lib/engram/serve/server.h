// `engramctl serve`: an OpenAI-compatible HTTP endpoint over a model::Session
// (schemas/http_api.md), on serve's own HTTP/1.1 server (http.h). Endpoints: GET /health,
// GET /v1/models, POST /v1/completions, POST /v1/chat/completions (stream or not), GET /metrics
// (Prometheus text), GET / (status page).
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
  // Requests waiting for a batch slot; beyond it, 503 with Retry-After. 0 = 4 x the session's
  // max_batch (set by --batch or [inference] max_batch_size).
  size_t queue_capacity = 0;
  std::string config_path;  // shown on the status page
  // Largest request body (Content-Length) read; larger ones get 413 before they are read.
  size_t max_body_bytes = 1 << 20;
  // After Shutdown starts, in-flight requests may finish for this long; then what is left is
  // cancelled (503) and the server closes within about a second more.
  double grace_seconds = 10;
};

// Thread-safe: handlers run on the HTTP workers, generation on one scheduler thread.
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
  // Graceful stop: the listener and idle or half-read connections close at once; new
  // generation requests get 503; queued and running ones finish and are delivered within the
  // grace period, after which the rest are cancelled. Returns within grace_seconds + ~1 s.
  // Idempotent.
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

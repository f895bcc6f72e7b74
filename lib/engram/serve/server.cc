// serve's endpoints over its HTTP server (http.h): the routes, bearer-key auth decided from the
// request head (before any body is read), and the handlers that queue a request with the
// scheduler and answer when it finishes, whole or streamed as server-sent events. The request and
// reply shapes are in openai.cc, the queue in scheduler.cc, /metrics and the status page in
// status.cc.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engram/base/error.h"
#include "engram/base/module_status.h"
#include "engram/serve/api.h"
#include "engram/serve/http.h"
#include "engram/serve/openai.h"
#include "engram/serve/scheduler.h"
#include "engram/serve/status.h"

namespace engram::serve {

namespace {

using nlohmann::json;

HttpResponse JsonResponse(int status, const json& j) {
  HttpResponse r;
  r.status = status;
  r.body = j.dump();
  return r;
}

// The OpenAI error type for a status.
const char* ErrorType(int status) {
  if (status == 503) return "unavailable_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

HttpResponse Error(int status, const std::string& message) {
  HttpResponse r = JsonResponse(status, ErrorBody(status, message, ErrorType(status)));
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// Compares without an early exit, so response time does not reveal a key's prefix.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i % (b.size() + 1)]);
  return diff == 0;
}

struct Route {
  const char* path;
  const char* method;  // GET routes answer HEAD too
  bool auth;
};
constexpr Route kRoutes[] = {
    {"/health", "GET", false},         {"/v1/models", "GET", false},
    {"/v1/completions", "POST", true}, {"/v1/chat/completions", "POST", true},
    {"/metrics", "GET", true},         {"/", "GET", true},
};

std::string Sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

// A streamed reply's progress; its mutex orders the writes of the scheduler thread's on_text and
// on_done.
struct StreamState {
  std::mutex mu;
  bool started = false;
};

}  // namespace

// What engramctl's Server drives through the ServeApi table (api.h).
struct HttpServer {
  ServeOptions opts;
  base::Reporter& rep;
  Scheduler scheduler;
  std::unique_ptr<HttpCore> http;
  int port = 0;
  bool shut = false;

  HttpServer(ServeOptions o, base::Reporter& r)
      : opts(std::move(o)), rep(r), scheduler(opts.queue_capacity, r) {}
  ~HttpServer() { Shutdown(); }
  int Start();
  void SetSession(std::unique_ptr<model::Session> s) { scheduler.SetSession(std::move(s)); }
  void Shutdown();

  ReplyShape Shape() const {
    const model::Session* s = scheduler.session();
    return {s ? s->info().model_name : "",
            std::string("engramctl-0.1.0; base model, ") + kPlainChatTemplate};
  }

  // On the I/O thread, from the request head alone: 404, 405, 401, or go on to read the body.
  std::optional<HttpResponse> Admit(const HttpRequest& h) {
    const Route* route = nullptr;
    for (const Route& r : kRoutes)
      if (h.path == r.path) route = &r;
    if (!route)
      return Error(404, "no endpoint " + h.path +
                            " here; this server answers /v1/completions, /v1/chat/completions, "
                            "/v1/models, /health, /metrics and / (schemas/http_api.md)");
    const bool get = std::string_view(route->method) == "GET";
    if (h.method != route->method && !(get && h.method == "HEAD")) {
      HttpResponse r = Error(
          405, h.method + " " + h.path + " is not supported; send " + route->method + " " + h.path);
      r.headers.emplace_back("Allow", get ? "GET, HEAD" : route->method);
      return r;
    }
    if (!route->auth || !opts.api_key) return std::nullopt;
    const std::string* auth = h.Header("authorization");
    const std::string prefix = "Bearer ";
    if (auth && auth->size() > prefix.size() && auth->compare(0, prefix.size(), prefix) == 0 &&
        SameSecret(auth->substr(prefix.size()), *opts.api_key))
      return std::nullopt;
    scheduler.CountUnauthorized();
    return Error(401, !auth || auth->empty()
                          ? "missing API key: send 'Authorization: Bearer <key>' with the key this "
                            "server reads from $" +
                                opts.api_key_env
                          : "incorrect API key: this server expects the key in $" +
                                opts.api_key_env + " (the variable [api] api_key_env names)");
  }

  ServeSnapshot Snapshot() const {
    ServeSnapshot s = scheduler.Snapshot();
    s.http_refused = http ? http->refused() : 0;
    s.http_connections = http ? http->connections() : 0;
    return s;
  }

  // On a worker, with the whole request.
  void Handle(HttpRequest req, const std::shared_ptr<HttpExchange>& ex) {
    const std::string& p = req.path;
    if (p == "/health") {
      ex->Reply(scheduler.session() ? JsonResponse(200, json{{"status", "ok"}})
                                    : Error(503, "Loading model"));
    } else if (p == "/v1/models") {
      json data = json::array();
      if (const model::Session* s = scheduler.session())
        data.push_back({{"id", s->info().model_name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "engramctl"},
                        {"meta",
                         {{"table", s->info().table_path},
                          {"max_batch", s->info().max_batch},
                          {"context", s->info().max_seq},
                          {"chat_template", kPlainChatTemplate}}}});
      ex->Reply(JsonResponse(200, json{{"object", "list"}, {"data", data}}));
    } else if (p == "/metrics") {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = MetricsText(Snapshot());
      ex->Reply(r);
    } else if (p == "/") {
      HttpResponse r;
      r.content_type = "text/html; charset=utf-8";
      r.body = StatusPageHtml(Snapshot(), opts.config_path);
      ex->Reply(r);
    } else {
      Generate(req, ex, p == "/v1/chat/completions");
    }
  }

  void Generate(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex, bool chat) {
    auto job = std::make_shared<Job>();
    if (std::string bad = ParseRequest(req.body, chat, job.get()); !bad.empty())
      return ex->Reply(Error(400, bad));
    auto st = std::make_shared<StreamState>();
    Job* jp = job.get();  // the callbacks are the job's own: it outlives them
    job->req.on_text = [this, jp, ex, st](std::string_view piece) {
      if (jp->cancelled || ex->gone()) return false;
      if (!jp->stream) return true;
      std::lock_guard<std::mutex> lock(st->mu);
      BeginStream(*jp, *ex, *st);
      return ex->Write(Sse(Chunk(*jp, Shape(), std::string(piece), nullptr)));
    };
    job->on_done = [this, ex, st](Job& j) { Answer(j, *ex, *st); };
    std::string why;
    if (!scheduler.Submit(job, &why)) return ex->Reply(Error(503, why));
  }

  // The stream's status line and headers go out with its first piece (or its end), so that a
  // request that fails before any text still gets a plain error status.
  void BeginStream(const Job& j, HttpExchange& ex, StreamState& st) {
    if (st.started) return;
    st.started = true;
    ex.BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    if (j.chat) {
      json c = Chunk(j, Shape(), "", nullptr);
      c["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
      ex.Write(Sse(c));
    }
  }

  // on_done: the final reply, or the end of the stream.
  void Answer(const Job& j, HttpExchange& ex, StreamState& st) {
    const model::GenerateResult& r = j.result;
    const int status = j.unavailable ? 503
                       : r.finish_reason != "error"
                           ? 200
                           : (r.error_code == static_cast<int>(Code::kInvalidArgument) ? 400 : 500);
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.started && status != 200) return ex.Reply(Error(status, r.error));
    if (!j.stream) return ex.Reply(JsonResponse(200, FinalBody(j, Shape())));
    BeginStream(j, ex, st);
    if (status != 200) {
      ex.Write(Sse(ErrorBody(status, r.error, ErrorType(status))));
    } else {
      ex.Write(Sse(Chunk(j, Shape(), "", r.finish_reason.c_str())));
      if (j.include_usage) ex.Write(Sse(UsageChunk(j, Shape())));
    }
    ex.Write("data: [DONE]\n\n");
    ex.EndStream();
  }
};

int HttpServer::Start() {
  HttpLimits limits;
  limits.max_body_bytes = opts.max_body_bytes;
  HttpCore::Handlers h;
  h.admit = [this](const HttpRequest& head) { return Admit(head); };
  h.handle = [this](HttpRequest req, std::shared_ptr<HttpExchange> ex) {
    Handle(std::move(req), ex);
  };
  h.error = [](int status, const std::string& message) { return Error(status, message); };
  http = std::make_unique<HttpCore>(limits, std::move(h), rep);
  port = http->Start(opts.host, opts.port);
  return port;
}

void HttpServer::Shutdown() {
  if (shut) return;
  shut = true;
  const auto now = std::chrono::steady_clock::now();
  const auto grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.0, opts.grace_seconds)));
  if (http) http->StopAccepting();
  scheduler.Drain(now + grace);
  // The answers of the drained requests are written within the rest of the grace period, and at
  // least a second.
  if (http)
    http->Stop(std::max(now + grace, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
}

namespace {

const ServeApi kApi = {
    [](const ServeOptions* o, base::Reporter* rep, HttpServer** out, std::string* error) {
      return base::CatchAsStatus("the HTTP module", error,
                                 [&] { *out = new HttpServer(*o, *rep); });
    },
    [](HttpServer* s, int* port, std::string* error) {
      return base::CatchAsStatus("the HTTP module", error, [&] { *port = s->Start(); });
    },
    [](HttpServer* s, model::Session* session) {
      s->SetSession(std::unique_ptr<model::Session>(session));
    },
    [](HttpServer* s) { s->Shutdown(); },
    [](HttpServer* s) { delete s; },
    [](const RemoteOptions* o, RemoteReply* out, std::string* error) {
      return base::CatchAsStatus("the HTTP module", error, [&] { *out = HttpRemoteChat(*o); });
    },
};

}  // namespace

}  // namespace engram::serve

extern "C" __attribute__((visibility("default"))) const engram::serve::ServeApi*
engram_serve_api_v1() {
  return &engram::serve::kApi;
}

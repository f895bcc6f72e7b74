// serve's HTTP side (cpp-httplib): the routes, bearer-key auth, and the handlers that queue a
// request with the scheduler and write its reply, whole or streamed as server-sent events. The
// request and reply shapes are in openai.cc, the queue in scheduler.cc, /metrics and the status
// page in status.cc.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engram/base/error.h"
#include "engram/base/module_status.h"
#include "engram/serve/api.h"
#include "engram/serve/openai.h"
#include "engram/serve/scheduler.h"
#include "engram/serve/status.h"

namespace engram::serve {

namespace {

using nlohmann::json;

void SendError(httplib::Response& res, int status, const std::string& message,
               const std::string& type) {
  res.status = status;
  res.set_content(ErrorBody(status, message, type).dump(), "application/json");
}

// Compares without an early exit, so response time does not reveal a key's prefix.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i % (b.size() + 1)]);
  return diff == 0;
}

}  // namespace

// What engramctl's Server drives through the ServeApi table (api.h).
struct HttpServer {
  ServeOptions opts;
  base::Reporter& rep;
  httplib::Server http;
  std::thread listen_thread;
  int port = 0;
  Scheduler scheduler;

  HttpServer(ServeOptions o, base::Reporter& r)
      : opts(std::move(o)), rep(r), scheduler(opts.queue_capacity, r) {}
  ~HttpServer() { Shutdown(); }
  int Start();
  void SetSession(std::unique_ptr<model::Session> s);
  void Shutdown();

  ReplyShape Shape() const {
    const model::Session* s = scheduler.session();
    return {s ? s->info().model_name : "",
            std::string("engramctl-0.1.0; base model, ") + kPlainChatTemplate};
  }

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (!opts.api_key) return true;
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.size() > prefix.size() && h.compare(0, prefix.size(), prefix) == 0 &&
        SameSecret(h.substr(prefix.size()), *opts.api_key))
      return true;
    scheduler.CountUnauthorized();
    SendError(res, 401,
              h.empty() ? "missing API key: send 'Authorization: Bearer <key>' with the key this "
                          "server reads from $" +
                              opts.api_key_env
                        : "incorrect API key: this server expects the key in $" + opts.api_key_env +
                              " (the variable [api] api_key_env names)",
              "invalid_request_error");
    return false;
  }

  void Generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!Authorized(req, res)) return;
    auto job = std::make_shared<Job>();
    if (std::string bad = ParseRequest(req.body, chat, job.get()); !bad.empty()) {
      SendError(res, 400, bad, "invalid_request_error");
      return;
    }
    if (job->stream) {
      Job* jp = job.get();
      job->req.on_text = [jp](std::string_view piece) {
        if (jp->cancelled) return false;
        std::lock_guard<std::mutex> lock(jp->mu);
        jp->pieces.emplace_back(piece);
        jp->cv.notify_all();
        return true;
      };
    } else {
      job->req.on_text = nullptr;
    }
    std::string why;
    if (!scheduler.Submit(job, &why)) {
      res.set_header("Retry-After", "1");
      SendError(res, 503, why, "unavailable_error");
      return;
    }
    if (!job->stream) {
      std::unique_lock<std::mutex> lock(job->mu);
      job->cv.wait(lock, [&] { return job->finished; });
      if (job->result.finish_reason == "error") {
        const bool client = job->result.error_code == static_cast<int>(Code::kInvalidArgument);
        SendError(res, client ? 400 : 500, job->result.error,
                  client ? "invalid_request_error" : "server_error");
        return;
      }
      res.set_content(FinalBody(*job, Shape()).dump(), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, sent_role = false](size_t, httplib::DataSink& sink) mutable {
          auto write = [&](const json& j) {
            std::string s = "data: " + j.dump() + "\n\n";
            return sink.write(s.data(), s.size());
          };
          if (job->chat && !sent_role) {
            sent_role = true;
            json j = Chunk(*job, Shape(), "", nullptr);
            j["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
            if (!write(j)) return job->cancelled = true, false;
          }
          std::unique_lock<std::mutex> lock(job->mu);
          job->cv.wait_for(lock, std::chrono::milliseconds(200),
                           [&] { return job->finished || !job->pieces.empty(); });
          std::deque<std::string> pieces;
          pieces.swap(job->pieces);
          const bool finished = job->finished;
          lock.unlock();
          for (const auto& p : pieces)
            if (!write(Chunk(*job, Shape(), p, nullptr))) return job->cancelled = true, false;
          if (!finished) {
            if (!sink.is_writable()) return job->cancelled = true, false;
            return true;
          }
          const auto& r = job->result;
          if (r.finish_reason == "error") {
            write(ErrorBody(500, r.error, "server_error"));
          } else {
            write(Chunk(*job, Shape(), "", r.finish_reason.c_str()));
            if (job->include_usage) write(UsageChunk(*job, Shape()));
          }
          static const std::string kDone = "data: [DONE]\n\n";
          sink.write(kDone.data(), kDone.size());
          sink.done();
          return true;
        });
  }
};

int HttpServer::Start() {
  HttpServer& d = *this;
  const size_t threads =
      (d.opts.queue_capacity ? d.opts.queue_capacity : 4 * d.opts.max_batch) + d.opts.max_batch + 8;
  d.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  d.http.Get("/health", [&d](const httplib::Request&, httplib::Response& res) {
    if (!d.scheduler.session())
      SendError(res, 503, "Loading model", "unavailable_error");
    else
      res.set_content(json{{"status", "ok"}}.dump(), "application/json");
  });
  d.http.Get("/v1/models", [&d](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    if (const model::Session* s = d.scheduler.session())
      data.push_back({{"id", s->info().model_name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "engramctl"},
                      {"meta",
                       {{"table", s->info().table_path},
                        {"max_batch", s->info().max_batch},
                        {"context", s->info().max_seq},
                        {"chat_template", kPlainChatTemplate}}}});
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });
  d.http.Post("/v1/completions", [&d](const httplib::Request& req, httplib::Response& res) {
    d.Generate(req, res, false);
  });
  d.http.Post("/v1/chat/completions", [&d](const httplib::Request& req, httplib::Response& res) {
    d.Generate(req, res, true);
  });
  d.http.Get("/metrics", [&d](const httplib::Request& req, httplib::Response& res) {
    if (!d.Authorized(req, res)) return;
    res.set_content(MetricsText(d.scheduler.Snapshot()), "text/plain; version=0.0.4");
  });
  d.http.Get("/", [&d](const httplib::Request& req, httplib::Response& res) {
    if (!d.Authorized(req, res)) return;
    res.set_content(StatusPageHtml(d.scheduler.Snapshot(), d.opts.config_path),
                    "text/html; charset=utf-8");
  });
  if (d.opts.port == 0)
    d.port = d.http.bind_to_any_port(d.opts.host);
  else
    d.port = d.http.bind_to_port(d.opts.host, d.opts.port) ? d.opts.port : -1;
  ENGRAM_CHECK(d.port > 0, Code::kIo,
               "cannot listen on " << d.opts.host << ":" << d.opts.port
                                   << " (address in use or not local); pick another --port or "
                                      "--host");
  d.listen_thread = std::thread([&d] { d.http.listen_after_bind(); });
  return d.port;
}

void HttpServer::SetSession(std::unique_ptr<model::Session> s) {
  scheduler.SetSession(std::move(s));
}

void HttpServer::Shutdown() {
  scheduler.Drain();
  http.stop();  // lets handlers that are writing their responses finish (the pool joins)
  if (listen_thread.joinable()) listen_thread.join();
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

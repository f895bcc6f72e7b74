// HTTP side of `serve`: request parsing and responses (nlohmann-json), auth, the bounded queue
// and the scheduler thread that batches queued requests into model::Session::GenerateBatch.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engram/base/error.h"
#include "engram/base/units.h"
#include "engram/serve/api.h"

namespace engram::serve {

namespace {

using base::LogLevel;
using nlohmann::json;

// One queued or running generation request.
struct Job {
  uint64_t id = 0;
  bool chat = false, stream = false, include_usage = false;
  model::GenerateRequest req;
  model::GenerateResult result;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> pieces;  // streamed text not yet written
  bool finished = false;
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

double Rate(uint64_t hits, uint64_t lookups) {
  return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
}

json ErrorBody(int code, const std::string& message, const std::string& type) {
  return json{
      {"error", {{"code", code}, {"message", message}, {"type", type}, {"param", nullptr}}}};
}

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

constexpr double kLatencyBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

}  // namespace

// What engramctl's Server drives through the ServeApi table (api.h).
struct HttpServer {
  ServeOptions opts;
  base::Reporter& rep;
  httplib::Server http;
  std::thread listen_thread, scheduler;
  int port = 0;

  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  std::unique_ptr<model::Session> session;
  std::deque<std::shared_ptr<Job>> queue;
  size_t running = 0;  // jobs taken by the scheduler and not yet finished
  bool draining = false, stopped = false;
  uint64_t next_id = 0;
  // Metrics.
  uint64_t requests = 0, failed = 0, rejected = 0, unauthorized = 0, cancelled = 0;
  uint64_t prompt_tokens = 0, completion_tokens = 0, lookups = 0, hits = 0, bypasses = 0;
  uint64_t batches = 0, batched_requests = 0;
  uint64_t latency_counts[std::size(kLatencyBuckets) + 1] = {};
  double latency_sum = 0;
  std::deque<std::pair<uint64_t, double>> recent;  // (request id, hit rate), newest last
  bool low_rate_explained = false;  // the scheduler thread's: a low hit rate is explained once

  HttpServer(ServeOptions o, base::Reporter& r) : opts(std::move(o)), rep(r) {}
  ~HttpServer() { Shutdown(); }
  int Start();
  void SetSession(std::unique_ptr<model::Session> s);
  void Shutdown();

  std::string Fingerprint() const {
    return std::string("engramctl-0.1.0; base model, ") + kPlainChatTemplate;
  }

  bool Authorized(const httplib::Request& req, httplib::Response& res) {
    if (!opts.api_key) return true;
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.size() > prefix.size() && h.compare(0, prefix.size(), prefix) == 0 &&
        SameSecret(h.substr(prefix.size()), *opts.api_key))
      return true;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++unauthorized;
    }
    SendError(res, 401,
              h.empty() ? "missing API key: send 'Authorization: Bearer <key>' with the key this "
                          "server reads from $" +
                              opts.api_key_env
                        : "incorrect API key: this server expects the key in $" + opts.api_key_env +
                              " (the variable [api] api_key_env names)",
              "invalid_request_error");
    return false;
  }

  // Parses an OpenAI request body into a Job; false (with a 400 sent) when it is invalid.
  bool ParseJob(const httplib::Request& req, httplib::Response& res, bool chat, Job* job) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      SendError(res, 400, "the request body is not a JSON object", "invalid_request_error");
      return false;
    }
    try {
      job->chat = chat;
      if (chat) {
        const json& msgs = body.at("messages");
        if (!msgs.is_array() || msgs.empty()) throw std::invalid_argument("messages");
        std::string p;
        for (size_t i = 0; i < msgs.size(); ++i) {
          const json& c = msgs[i].at("content");
          std::string text;
          if (c.is_string()) {
            text = c.get<std::string>();
          } else {  // [{"type":"text","text":...}, ...]
            for (const auto& part : c)
              if (part.value("type", "") == "text") text += part.at("text").get<std::string>();
          }
          p += (i ? "\n" : "") + text;
        }
        job->req.prompt = p;
      } else {
        const json& pr = body.at("prompt");
        if (pr.is_array()) {
          if (pr.size() != 1) throw std::invalid_argument("prompt");
          job->req.prompt = pr[0].get<std::string>();
        } else {
          job->req.prompt = pr.get<std::string>();
        }
      }
      job->req.max_tokens = body.value("max_tokens", body.value("max_completion_tokens", 64));
      job->req.temperature = body.value("temperature", 0.8);
      job->req.top_p = body.value("top_p", 0.95);
      job->req.top_k = body.value("top_k", 40);
      if (body.contains("seed") && !body["seed"].is_null())
        job->req.seed = body["seed"].get<uint64_t>();
      else
        job->req.seed = std::random_device{}();
      if (body.contains("stop") && !body["stop"].is_null()) {
        if (body["stop"].is_string())
          job->req.stop.push_back(body["stop"].get<std::string>());
        else
          for (const auto& s : body["stop"]) job->req.stop.push_back(s.get<std::string>());
      }
      if (body.value("n", 1) != 1) {
        SendError(res, 400,
                  "n = " + std::to_string(body.value("n", 1)) +
                      " is not supported; this server returns one choice (n = 1)",
                  "invalid_request_error");
        return false;
      }
      job->stream = body.value("stream", false);
      if (body.contains("stream_options") && body["stream_options"].is_object())
        job->include_usage = body["stream_options"].value("include_usage", false);
    } catch (const std::exception& e) {
      SendError(res, 400,
                std::string("invalid request: ") + e.what() +
                    (chat ? "; send {\"messages\":[{\"role\":\"user\",\"content\":\"...\"}]}"
                          : "; send {\"prompt\":\"...\"}"),
                "invalid_request_error");
      return false;
    }
    if (job->req.max_tokens < 0 || job->req.temperature < 0 || job->req.top_p <= 0 ||
        job->req.top_p > 1) {
      SendError(res, 400, "max_tokens must be >= 0, temperature >= 0 and top_p in (0, 1]",
                "invalid_request_error");
      return false;
    }
    return true;
  }

  json EngramObject(const model::GenerateResult& r) const {
    const uint64_t l = r.prompt_lookups + r.gen_lookups, h = r.prompt_hits + r.gen_hits;
    auto part = [](uint64_t lk, uint64_t ht) {
      return json{{"lookups", lk}, {"hits", ht}, {"misses", lk - ht}, {"hit_rate", Rate(ht, lk)}};
    };
    return json{{"lookups", l},
                {"hits", h},
                {"misses", l - h},
                {"bypass", r.bypass},
                {"hit_rate", Rate(h, l)},
                {"prompt", part(r.prompt_lookups, r.prompt_hits)},
                {"generated", part(r.gen_lookups, r.gen_hits)},
                {"table_generation", r.table.generation},
                {"journal_commits", r.table.journal_commits},
                {"journal_entries", r.table.journal_entries},
                {"table_stale", r.table.stale}};
  }

  json Usage(const model::GenerateResult& r) const {
    return json{{"prompt_tokens", r.prompt_tokens},
                {"completion_tokens", r.completion_tokens},
                {"total_tokens", r.prompt_tokens + r.completion_tokens}};
  }

  json Envelope(const Job& job, bool chunk) const {
    return json{{"id", (job.chat ? "chatcmpl-" : "cmpl-") + std::to_string(job.id)},
                {"object", job.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                    : "text_completion"},
                {"created", static_cast<int64_t>(std::time(nullptr))},
                {"model", session ? session->info().model_name : ""},
                {"system_fingerprint", Fingerprint()}};
  }

  json FinalBody(const Job& job) const {
    json j = Envelope(job, false);
    const auto& r = job.result;
    json choice = {{"index", 0}, {"finish_reason", r.finish_reason}, {"logprobs", nullptr}};
    if (job.chat)
      choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    else
      choice["text"] = r.text;
    j["choices"] = json::array({choice});
    j["usage"] = Usage(r);
    j["engram"] = EngramObject(r);
    return j;
  }

  json Chunk(const Job& job, const std::string& piece, const char* finish) const {
    json j = Envelope(job, true);
    json choice = {{"index", 0}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
    if (job.chat)
      choice["delta"] = finish ? json::object() : json{{"content", piece}};
    else
      choice["text"] = piece;
    j["choices"] = json::array({choice});
    return j;
  }

  // Queues a job; false when the queue is full or the server drains.
  bool Submit(const std::shared_ptr<Job>& job, std::string* why) {
    std::lock_guard<std::mutex> lock(mu);
    if (draining) {
      *why = "the server is shutting down";
      return false;
    }
    if (!session) {
      *why = "Loading model";
      return false;
    }
    const size_t cap = opts.queue_capacity ? opts.queue_capacity : 4 * opts.max_batch;
    if (queue.size() >= cap) {
      ++rejected;
      *why = "the request queue is full (" + std::to_string(cap) + " waiting); retry shortly";
      return false;
    }
    job->id = ++next_id;
    queue.push_back(job);
    cv.notify_all();
    return true;
  }

  void Generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!Authorized(req, res)) return;
    auto job = std::make_shared<Job>();
    if (!ParseJob(req, res, chat, job.get())) return;
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
    if (!Submit(job, &why)) {
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
      res.set_content(FinalBody(*job).dump(), "application/json");
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
            json j = Chunk(*job, "", nullptr);
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
            if (!write(Chunk(*job, p, nullptr))) return job->cancelled = true, false;
          if (!finished) {
            if (!sink.is_writable()) return job->cancelled = true, false;
            return true;
          }
          const auto& r = job->result;
          if (r.finish_reason == "error") {
            write(ErrorBody(500, r.error, "server_error"));
          } else {
            write(Chunk(*job, "", r.finish_reason.c_str()));
            if (job->include_usage) {
              json j = Envelope(*job, true);
              j["choices"] = json::array();
              j["usage"] = Usage(r);
              j["engram"] = EngramObject(r);
              write(j);
            }
          }
          static const std::string kDone = "data: [DONE]\n\n";
          sink.write(kDone.data(), kDone.size());
          sink.done();
          return true;
        });
  }

  void LogRequest(const Job& job) {
    const auto& r = job.result;
    const std::string head = "[engram] request " + std::to_string(job.id) + ": ";
    if (r.finish_reason == "error") {
      rep.Log(LogLevel::kWarning, head + "failed: " + r.error);
      return;
    }
    if (r.finish_reason == "cancelled")
      rep.Log(LogLevel::kInfo, head + "cancelled: the client went away after " +
                                   std::to_string(r.completion_tokens) +
                                   " generated token(s); its generation stopped");
    if (!session->info().engram) return;
    if (r.bypass)
      rep.Log(LogLevel::kInfo, head + "engram bypass: the prompt has " +
                                   std::to_string(r.prompt_tokens) +
                                   " token(s), fewer than the n-gram order " +
                                   std::to_string(session->info().ngram_order) +
                                   ", so its first positions have no full n-gram (normal, not an "
                                   "error)");
    const uint64_t l = r.prompt_lookups + r.gen_lookups, h = r.prompt_hits + r.gen_hits;
    char line[256];
    std::snprintf(line, sizeof line,
                  "engram_hit_rate: %.2f (prompt %.2f, generated %.2f; %llu hits / %llu lookups), "
                  "engram lookup miss: %llu (table generation %llu)",
                  Rate(h, l), Rate(r.prompt_hits, r.prompt_lookups),
                  Rate(r.gen_hits, r.gen_lookups), static_cast<unsigned long long>(h),
                  static_cast<unsigned long long>(l), static_cast<unsigned long long>(l - h),
                  static_cast<unsigned long long>(r.table.generation));
    rep.Log(LogLevel::kInfo, head + line);
    // A rate far below what the table scores on its own corpus is explained, once.
    if (const auto& note_for = session->info().low_hit_rate_note; note_for && !low_rate_explained) {
      std::string note = note_for(Rate(h, l), l);
      if (!note.empty()) {
        low_rate_explained = true;
        rep.Log(LogLevel::kWarning, head + note + " (said once)");
      }
    }
  }

  void SchedulerLoop() {
    for (;;) {
      std::vector<std::shared_ptr<Job>> batch;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopped || !queue.empty(); });
        if (stopped && queue.empty()) return;
        while (!queue.empty() && batch.size() < static_cast<size_t>(opts.max_batch)) {
          if (!queue.front()->cancelled) batch.push_back(queue.front());
          queue.pop_front();
        }
        running += batch.size();
      }
      if (batch.empty()) continue;
      std::vector<model::GenerateRequest*> reqs;
      for (auto& j : batch) reqs.push_back(&j->req);
      std::vector<model::GenerateResult> results;
      session->GenerateBatch(reqs, &results);
      for (size_t i = 0; i < batch.size(); ++i) {
        Job& job = *batch[i];
        {
          std::lock_guard<std::mutex> lock(job.mu);
          job.result = std::move(results[i]);
        }
        LogRequest(job);
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - job.start).count();
        {
          std::lock_guard<std::mutex> lock(mu);
          const auto& r = job.result;
          ++requests;
          failed += r.finish_reason == "error";
          cancelled += r.finish_reason == "cancelled";
          prompt_tokens += r.prompt_tokens;
          completion_tokens += r.completion_tokens;
          lookups += r.prompt_lookups + r.gen_lookups;
          hits += r.prompt_hits + r.gen_hits;
          bypasses += r.bypass;
          size_t k = 0;
          while (k < std::size(kLatencyBuckets) && secs > kLatencyBuckets[k]) ++k;
          ++latency_counts[k];
          latency_sum += secs;
          if (r.finish_reason != "error" && r.prompt_lookups + r.gen_lookups > 0) {
            recent.emplace_back(job.id,
                                Rate(r.prompt_hits + r.gen_hits, r.prompt_lookups + r.gen_lookups));
            if (recent.size() > 60) recent.pop_front();
          }
        }
        {
          std::lock_guard<std::mutex> lock(job.mu);
          job.finished = true;
        }
        job.cv.notify_all();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        running -= batch.size();
        ++batches;
        batched_requests += batch.size();
      }
      cv.notify_all();
    }
  }

  std::string Metrics() {
    std::lock_guard<std::mutex> lock(mu);
    std::string m;
    auto metric = [&](const char* name, const char* type, const char* help, double v) {
      char b[64];
      std::snprintf(b, sizeof b, "%.17g", v);
      m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + b + "\n";
    };
    const model::TableState st = session ? session->table_state() : model::TableState{};
    metric("engram_model_loaded", "gauge", "1 once the model and table are loaded",
           session ? 1 : 0);
    metric("engram_requests_total", "counter", "Generation requests answered", requests);
    metric("engram_requests_failed_total", "counter", "Generation requests that failed", failed);
    metric("engram_requests_cancelled_total", "counter", "Requests whose client went away",
           cancelled);
    metric("engram_requests_rejected_total", "counter", "Requests refused with 503 (queue full)",
           rejected);
    metric("engram_requests_unauthorized_total", "counter", "Requests refused with 401",
           unauthorized);
    metric("engram_prompt_tokens_total", "counter", "Prompt tokens processed", prompt_tokens);
    metric("engram_generated_tokens_total", "counter", "Tokens generated", completion_tokens);
    metric("engram_lookups_total", "counter", "Engram lookups (positions with a full n-gram)",
           lookups);
    metric("engram_hits_total", "counter", "Engram lookups whose bucket owner matched", hits);
    metric("engram_misses_total", "counter", "Engram lookups that missed", lookups - hits);
    metric("engram_bypass_total", "counter", "Requests shorter than the n-gram order", bypasses);
    metric("engram_batches_total", "counter", "Batches generated", batches);
    metric("engram_batched_requests_total", "counter", "Requests over all batches",
           batched_requests);
    metric("engram_queue_depth", "gauge", "Requests waiting for a batch slot", queue.size());
    metric("engram_requests_in_flight", "gauge", "Requests queued or generating",
           queue.size() + running);
    metric("engram_table_generation", "gauge", "Table state serving requests (+1 per reload)",
           st.generation);
    metric("engram_journal_commits", "gauge", "Committed append transactions in that state",
           st.journal_commits);
    metric("engram_journal_entries", "gauge", "Journal entries overlaid on the base",
           st.journal_entries);
    metric("engram_table_stale", "gauge",
           "1 while deterministic addressing keeps an older state (sort-buckets needed)",
           st.stale ? 1 : 0);
    m += "# HELP engram_request_duration_seconds Request latency from arrival to completion\n"
         "# TYPE engram_request_duration_seconds histogram\n";
    uint64_t cum = 0;
    char b[512];
    for (size_t k = 0; k < std::size(kLatencyBuckets); ++k) {
      cum += latency_counts[k];
      std::snprintf(b, sizeof b, "engram_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    kLatencyBuckets[k], static_cast<unsigned long long>(cum));
      m += b;
    }
    cum += latency_counts[std::size(kLatencyBuckets)];
    std::snprintf(b, sizeof b,
                  "engram_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                  "engram_request_duration_seconds_sum %.6f\n"
                  "engram_request_duration_seconds_count %llu\n",
                  static_cast<unsigned long long>(cum), latency_sum,
                  static_cast<unsigned long long>(cum));
    m += b;
    return m;
  }

  static std::string Html(const std::string& s) {
    std::string o;
    for (char c : s) {
      switch (c) {
        case '<':
          o += "&lt;";
          break;
        case '>':
          o += "&gt;";
          break;
        case '&':
          o += "&amp;";
          break;
        case '"':
          o += "&quot;";
          break;
        default:
          o += c;
      }
    }
    return o;
  }

  std::string StatusPage() {
    std::lock_guard<std::mutex> lock(mu);
    const model::TableState st = session ? session->table_state() : model::TableState{};
    char num[64];
    std::snprintf(num, sizeof num, "%.4f", Rate(hits, lookups));
    std::string h =
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>engramctl serve</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:2px 12px}</style></head><body>"
        "<h1>engramctl serve</h1><table>";
    auto row = [&](const std::string& k, const std::string& v, const char* id) {
      h += "<tr><td>" + k + "</td><td id=\"" + id + "\">" + Html(v) + "</td></tr>";
    };
    row("model",
        session ? session->info().model_name + " (" + session->info().model_dir + ")" : "loading",
        "model");
    row("table", session ? session->info().table_path : "", "table");
    row("config", opts.config_path, "config");
    row("table generation", std::to_string(st.generation), "generation");
    row("journal",
        std::to_string(st.journal_commits) + " commits, " + std::to_string(st.journal_entries) +
            " entries" + (st.stale ? " (not folded: run engramctl sort-buckets)" : ""),
        "journal");
    row("requests",
        std::to_string(requests) + " (" + std::to_string(failed) + " failed, " +
            std::to_string(rejected) + " rejected)",
        "requests");
    row("engram_hit_rate (all requests)", num, "hit-rate");
    h += "</table><h2>engram_hit_rate of the last " + std::to_string(recent.size()) +
         " requests</h2>";
    const int W = 600, H = 200;
    h += "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) +
         "\" height=\"" + std::to_string(H) +
         "\" style=\"border:1px solid #ccc\"><line x1=\"0\" y1=\"" + std::to_string(H / 2) +
         "\" x2=\"" + std::to_string(W) + "\" y2=\"" + std::to_string(H / 2) +
         "\" stroke=\"#eee\"/><polyline fill=\"none\" stroke=\"#1a73e8\" stroke-width=\"2\" "
         "points=\"";
    for (size_t i = 0; i < recent.size(); ++i) {
      char p[64];
      double x = recent.size() > 1 ? static_cast<double>(i) * W / (recent.size() - 1) : W / 2.0;
      std::snprintf(p, sizeof p, "%.1f,%.1f ", x, H - recent[i].second * H);
      h += p;
    }
    h += "\"/></svg><p>last:";
    for (size_t i = recent.size() > 10 ? recent.size() - 10 : 0; i < recent.size(); ++i) {
      std::snprintf(num, sizeof num, " #%llu %.2f",
                    static_cast<unsigned long long>(recent[i].first), recent[i].second);
      h += num;
    }
    h += "</p></body></html>\n";
    return h;
  }
};

int HttpServer::Start() {
  HttpServer& d = *this;
  const size_t threads =
      (d.opts.queue_capacity ? d.opts.queue_capacity : 4 * d.opts.max_batch) + d.opts.max_batch + 8;
  d.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  d.http.Get("/health", [&d](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.session)
      SendError(res, 503, "Loading model", "unavailable_error");
    else
      res.set_content(json{{"status", "ok"}}.dump(), "application/json");
  });
  d.http.Get("/v1/models", [&d](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(d.mu);
    json data = json::array();
    if (d.session)
      data.push_back({{"id", d.session->info().model_name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "engramctl"},
                      {"meta",
                       {{"table", d.session->info().table_path},
                        {"max_batch", d.session->info().max_batch},
                        {"context", d.session->info().max_seq},
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
    res.set_content(d.Metrics(), "text/plain; version=0.0.4");
  });
  d.http.Get("/", [&d](const httplib::Request& req, httplib::Response& res) {
    if (!d.Authorized(req, res)) return;
    res.set_content(d.StatusPage(), "text/html; charset=utf-8");
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
  HttpServer& d = *this;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.opts.max_batch = std::max(1, s->info().max_batch);
    d.session = std::move(s);
  }
  d.scheduler = std::thread([&d] { d.SchedulerLoop(); });
}

void HttpServer::Shutdown() {
  HttpServer& d = *this;
  {
    std::unique_lock<std::mutex> lock(d.mu);
    if (d.stopped) return;
    d.draining = true;
    d.cv.wait(lock, [&] { return d.queue.empty() && d.running == 0; });
    d.stopped = true;
  }
  d.cv.notify_all();
  if (d.scheduler.joinable()) d.scheduler.join();
  d.http.stop();  // lets handlers that are writing their responses finish (the pool joins)
  if (d.listen_thread.joinable()) d.listen_thread.join();
}

namespace {

template <typename F>
int Guard(std::string* error, F&& f) {
  try {
    f();
    return 0;
  } catch (const Error& e) {
    *error = e.what();
    return 1 + static_cast<int>(e.code());
  } catch (const std::exception& e) {
    *error = e.what();
    return 1 + static_cast<int>(Code::kInternal);
  }
}

const ServeApi kApi = {
    [](const ServeOptions* o, base::Reporter* rep, HttpServer** out, std::string* error) {
      return Guard(error, [&] { *out = new HttpServer(*o, *rep); });
    },
    [](HttpServer* s, int* port, std::string* error) {
      return Guard(error, [&] { *port = s->Start(); });
    },
    [](HttpServer* s, model::Session* session) {
      s->SetSession(std::unique_ptr<model::Session>(session));
    },
    [](HttpServer* s) { s->Shutdown(); },
    [](HttpServer* s) { delete s; },
    [](const RemoteOptions* o, RemoteReply* out, std::string* error) {
      return Guard(error, [&] { *out = HttpRemoteChat(*o); });
    },
};

}  // namespace

}  // namespace engram::serve

extern "C" __attribute__((visibility("default"))) const engram::serve::ServeApi*
engram_serve_api_v1() {
  return &engram::serve::kApi;
}

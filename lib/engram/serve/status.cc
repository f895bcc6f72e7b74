// /metrics and the status page, rendered from a scheduler snapshot.
#include "engram/serve/status.h"

#include <cstdio>

namespace engram::serve {

namespace {

std::string Html(const std::string& s) {
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

}  // namespace

std::string MetricsText(const ServeSnapshot& s) {
  const ServeCounters& c = s.counters;
  std::string m;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v);
    m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + b + "\n";
  };
  const model::TableState& st = s.table;
  metric("engram_model_loaded", "gauge", "1 once the model and table are loaded",
         s.session ? 1 : 0);
  metric("engram_requests_total", "counter", "Generation requests answered", c.requests);
  metric("engram_requests_failed_total", "counter", "Generation requests that failed", c.failed);
  metric("engram_requests_cancelled_total", "counter", "Requests whose client went away",
         c.cancelled);
  metric("engram_requests_rejected_total", "counter", "Requests refused with 503 (queue full)",
         c.rejected);
  metric("engram_requests_unauthorized_total", "counter", "Requests refused with 401",
         c.unauthorized);
  metric("engram_prompt_tokens_total", "counter", "Prompt tokens processed", c.prompt_tokens);
  metric("engram_generated_tokens_total", "counter", "Tokens generated", c.completion_tokens);
  metric("engram_lookups_total", "counter", "Engram lookups (positions with a full n-gram)",
         c.lookups);
  metric("engram_hits_total", "counter", "Engram lookups whose bucket owner matched", c.hits);
  metric("engram_misses_total", "counter", "Engram lookups that missed", c.lookups - c.hits);
  metric("engram_bypass_total", "counter", "Requests shorter than the n-gram order", c.bypasses);
  metric("engram_batches_total", "counter", "Batches generated", c.batches);
  metric("engram_batched_requests_total", "counter", "Requests over all batches",
         c.batched_requests);
  metric("engram_requests_table_unavailable_total", "counter",
         "Requests refused with 503 because the table file was damaged under the server",
         c.table_unavailable);
  metric("engram_http_refused_total", "counter",
         "Requests refused by an HTTP limit or malformed (400, 408, 411, 413, 414, 431, 503 over "
         "the connection limit)",
         s.http_refused);
  metric("engram_http_connections", "gauge", "Open client connections", s.http_connections);
  metric("engram_queue_depth", "gauge", "Requests waiting for a batch slot", s.queued);
  metric("engram_queue_capacity", "gauge", "Requests that may wait before 503 (--queue)",
         s.queue_capacity);
  metric("engram_requests_in_flight", "gauge", "Requests queued or generating",
         s.queued + s.running);
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
    cum += c.latency_counts[k];
    std::snprintf(b, sizeof b, "engram_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                  kLatencyBuckets[k], static_cast<unsigned long long>(cum));
    m += b;
  }
  cum += c.latency_counts[std::size(kLatencyBuckets)];
  std::snprintf(b, sizeof b,
                "engram_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                "engram_request_duration_seconds_sum %.6f\n"
                "engram_request_duration_seconds_count %llu\n",
                static_cast<unsigned long long>(cum), c.latency_sum,
                static_cast<unsigned long long>(cum));
  m += b;
  return m;
}

std::string StatusPageHtml(const ServeSnapshot& s, const std::string& config_path) {
  const ServeCounters& c = s.counters;
  const model::TableState& st = s.table;
  const model::Session* session = s.session;
  char num[64];
  std::snprintf(num, sizeof num, "%.4f", HitRate(c.hits, c.lookups));
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
  row("config", config_path, "config");
  row("table generation", std::to_string(st.generation), "generation");
  row("journal",
      std::to_string(st.journal_commits) + " commits, " + std::to_string(st.journal_entries) +
          " entries" + (st.stale ? " (not folded: run engramctl sort-buckets)" : ""),
      "journal");
  row("requests",
      std::to_string(c.requests) + " (" + std::to_string(c.failed) + " failed, " +
          std::to_string(c.rejected) + " rejected)",
      "requests");
  row("engram_hit_rate (all requests)", num, "hit-rate");
  h += "</table><h2>engram_hit_rate of the last " + std::to_string(c.recent.size()) +
       " requests</h2>";
  const int W = 600, H = 200;
  h += "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) +
       "\" height=\"" + std::to_string(H) +
       "\" style=\"border:1px solid #ccc\"><line x1=\"0\" y1=\"" + std::to_string(H / 2) +
       "\" x2=\"" + std::to_string(W) + "\" y2=\"" + std::to_string(H / 2) +
       "\" stroke=\"#eee\"/><polyline fill=\"none\" stroke=\"#1a73e8\" stroke-width=\"2\" "
       "points=\"";
  for (size_t i = 0; i < c.recent.size(); ++i) {
    char p[64];
    double x = c.recent.size() > 1 ? static_cast<double>(i) * W / (c.recent.size() - 1) : W / 2.0;
    std::snprintf(p, sizeof p, "%.1f,%.1f ", x, H - c.recent[i].second * H);
    h += p;
  }
  h += "\"/></svg><p>last:";
  for (size_t i = c.recent.size() > 10 ? c.recent.size() - 10 : 0; i < c.recent.size(); ++i) {
    std::snprintf(num, sizeof num, " #%llu %.2f",
                  static_cast<unsigned long long>(c.recent[i].first), c.recent[i].second);
    h += num;
  }
  h += "</p></body></html>\n";
  return h;
}

}  // namespace engram::serve

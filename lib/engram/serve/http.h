// serve's HTTP/1.1 server: one listening socket, one I/O thread that accepts connections and reads
// requests under size limits and deadlines, a small pool of workers that run the handlers, and
// responses (whole, or chunked for server-sent events) written back by the I/O thread. Internal
// to libengram_serve.so; the limits and status codes are in schemas/http_api.md.
//
// Why not cpp-httplib's server: Debian ships httplib compiled, so its header-count limit, its
// thread pool and its habit of reading a whole body before the handler (and so before auth) can
// not be configured; a slow client holds one of its threads for as long as it trickles. Here a
// connection costs a buffer bounded by the limits and no thread until a whole request has arrived.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engram/base/reporter.h"

namespace engram::serve {

// What one client may make the server hold, and for how long. Every limit is checked before the
// bytes beyond it are read, and before authentication.
struct HttpLimits {
  size_t max_body_bytes = 1 << 20;  // Content-Length above it: 413
  size_t max_target_bytes = 8192;   // request target (path and query): 414
  size_t max_head_bytes = 32768;    // request line + header lines: 431
  size_t max_header_count = 64;     // header lines: 431
  int head_timeout_ms = 10000;      // first byte of a request to the end of its head: 408, closed
  int body_timeout_ms = 30000;      // end of the head to the end of the body: 408, closed
  int idle_timeout_ms = 15000;      // a kept-alive connection waiting for its next request: closed
  int write_timeout_ms = 30000;  // a response that makes no progress (client not reading): closed
  size_t max_connections = 512;  // open at once; beyond it a new one gets 503 and is closed
  size_t body_budget_bytes = 256u << 20;  // bodies being read, all connections together: 503
  int workers = 4;                        // threads running handlers (never waiting on a model)
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// One request as read off the wire.
struct HttpRequest {
  std::string method;     // as sent, e.g. "GET" (methods are case-sensitive)
  std::string target;     // as sent: origin-form path[?query]
  std::string path;       // the target up to '?'
  int version_minor = 1;  // HTTP/1.<minor> (0 or 1)
  HttpHeaders headers;    // names lower-cased, values without surrounding blanks, in order
  std::string body;
  uint64_t content_length = 0;
  bool keep_alive = true;        // HTTP/1.1 without "Connection: close"
  bool expect_continue = false;  // "Expect: 100-continue"

  // The value of the first header called `lower_name`, or null.
  const std::string* Header(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // besides Content-Type, Content-Length and Connection
  std::string body;
};

// Outcome of parsing a request head: status 0, or the 4xx/5xx to answer and why.
struct HttpError {
  int status = 0;
  std::string message;  // subject, values, fix (the error body's message)
};

// Parses a complete request head: the request line and header lines, each ending in CRLF, up to
// and including the empty line. Strict: one space between the request-line parts, origin-form
// targets, no folded or nameless headers, no CTLs; Content-Length digits only (repeated only with
// the same value); any Transfer-Encoding is 411 (request bodies must have a Content-Length).
// Fills everything of *req but the body.
HttpError ParseRequestHead(std::string_view head, const HttpLimits& limits, HttpRequest* req);

// Finds the end of a request head in a buffer that grows as bytes arrive, scanning each byte
// once, and refuses an over-long request line (414), too many header lines or too many head bytes
// (431) as soon as the limit is crossed rather than once the head has ended. Up to 4 empty lines
// before the request line are skipped (RFC 9112 2.2).
class HeadScanner {
 public:
  explicit HeadScanner(const HttpLimits& limits) : limits_(&limits) {}
  // `buffered` starts where the previous call's started and holds at least as many bytes.
  HttpError Scan(std::string_view buffered);
  // Once the head is complete: its first byte (after skipped empty lines) and its size up to and
  // including the empty line; size 0 before.
  size_t head_begin() const { return begin_; }
  size_t head_size() const { return end_ ? end_ - begin_ : 0; }
  void Reset() { *this = HeadScanner(*limits_); }

 private:
  const HttpLimits* limits_;
  size_t pos_ = 0, line_start_ = 0, begin_ = 0, end_ = 0;
  size_t lines_ = 0;    // complete lines of the head so far (the request line included)
  size_t skipped_ = 0;  // empty lines before the request line
};

// "Not Found" for 404, ... ("Unknown" for codes this server never sends).
const char* HttpReason(int status);

// The write side of one request, usable from any thread. The response must be given exactly once:
// Reply, or BeginStream + Write... + EndStream. An exchange destroyed before that answers 500 (a
// bug that must not leave the client waiting). Responses to HEAD requests leave out the body.
class HttpExchange {
 public:
  struct Impl;
  explicit HttpExchange(std::unique_ptr<Impl> impl);
  ~HttpExchange();
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  void Reply(const HttpResponse& r);
  // Starts a response with Transfer-Encoding: chunked.
  void BeginStream(int status, const std::string& content_type, const HttpHeaders& headers);
  // Sends one chunk (empty data sends nothing). False once the client is gone: stop producing.
  bool Write(std::string_view data);
  void EndStream();
  // True once the connection is closed or reset, or its writes stalled past the write timeout.
  bool gone() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// The HTTP server. Thread-safe.
class HttpCore {
 public:
  struct Handlers {
    // Runs on the I/O thread once a request's head is read and within the limits, before its
    // body is read: returns the response to send instead (404, 405, 401, ...), or nullopt to read
    // the body and call `handle`. Must be quick and never block.
    std::function<std::optional<HttpResponse>(const HttpRequest& head)> admit;
    // Runs on a worker with the whole request; answers through the exchange, at once or later
    // from any thread. Exceptions are caught and answered 500.
    std::function<void(HttpRequest req, std::shared_ptr<HttpExchange> ex)> handle;
    // The response for an error the server answers itself (a limit, a malformed request, a
    // timeout, 500 for a handler that failed); `message` says what and what to do.
    std::function<HttpResponse(int status, const std::string& message)> error;
  };

  // The reporter must be thread-safe and outlive the server.
  HttpCore(HttpLimits limits, Handlers handlers, base::Reporter& rep);
  ~HttpCore();  // Stop() with no time left
  HttpCore(const HttpCore&) = delete;
  HttpCore& operator=(const HttpCore&) = delete;

  // Binds host:port (port 0 = any free port) without SO_REUSEPORT, so that a port another
  // process listens on is an error, and starts the I/O thread and the workers. Returns the bound
  // port. Throws kIo ("cannot listen on HOST:PORT: ...") or kInvalidArgument (bad host).
  int Start(const std::string& host, int port);
  // Closes the listening socket and every connection that is not being answered; connections
  // being answered close after their response. Idempotent; returns at once.
  void StopAccepting();
  // Waits until every response has been written or `deadline` passes, then closes every
  // connection and joins the threads. Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);

  // Requests refused by a limit (408, 411, 413, 414, 431, 400, 503 over capacity) so far.
  uint64_t refused() const;
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram::serve

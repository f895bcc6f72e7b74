// The HTTP/1.1 server under serve: request-head parsing with limits, and the I/O thread (epoll,
// non-blocking sockets) with its connection state machine, deadlines and worker pool.
#include "engram/serve/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engram/base/error.h"

namespace engram::serve {

namespace {

using Clock = std::chrono::steady_clock;
using base::LogLevel;

// The request line may exceed the target by the method, two spaces and "HTTP/1.1".
constexpr size_t kRequestLineSlack = 64;
constexpr size_t kMaxLeadingEmptyLines = 4;
constexpr size_t kReadChunk = 64 * 1024;
// After an error response the connection half-closes and discards what the client still sends
// for this long, so that the client reads the response instead of a reset (RFC 9112 9.6).
constexpr auto kLinger = std::chrono::milliseconds(2000);
// What a lingering connection may still send before it is reset: a client that keeps sending a
// refused body must not keep the I/O thread reading.
constexpr size_t kMaxLingerBytes = 4u << 20;
// Response bytes a client has not read yet; beyond, the client counts as gone (a stream whose
// reader stopped must not grow the server).
constexpr size_t kMaxUnsentBytes = 16u << 20;
constexpr auto kSweepEvery = std::chrono::milliseconds(100);
constexpr uint64_t kListenerTag = 0, kWakeTag = 1;

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(c); });
}

std::string Lower(std::string_view s) {
  std::string o(s);
  for (char& c : o)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return o;
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Comma-separated list element test, case-insensitive ("Connection: keep-alive, Close").
bool ListHas(std::string_view list, std::string_view lower_token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = TrimBlanks(list.substr(0, comma));
    if (Lower(item) == lower_token) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

HttpError Err(int status, std::string message) { return {status, std::move(message)}; }

std::string HeadBytes(int status, const std::string& content_type, const HttpHeaders& headers,
                      const std::optional<size_t>& content_length, bool close) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + HttpReason(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  if (content_length)
    h += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  else
    h += "Transfer-Encoding: chunked\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (close) h += "Connection: close\r\n";
  h += "\r\n";
  return h;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

const char* HttpReason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpError HeadScanner::Scan(std::string_view b) {
  if (end_) return {};
  const size_t max_line = limits_->max_target_bytes + kRequestLineSlack;
  auto too_long = [&] {
    return Err(414, "the request line is longer than " + std::to_string(max_line) +
                        " bytes (the target may have at most " +
                        std::to_string(limits_->max_target_bytes) + ")");
  };
  for (; pos_ < b.size(); ++pos_) {
    if (b[pos_] != '\n') continue;
    size_t len = pos_ - line_start_;
    if (len > 0 && b[pos_ - 1] == '\r') --len;
    if (len == 0 && lines_ == 0) {  // an empty line before the request line
      if (++skipped_ > kMaxLeadingEmptyLines)
        return Err(400, "the request starts with more than 4 empty lines");
      line_start_ = begin_ = pos_ + 1;
      continue;
    }
    if (len == 0) {
      end_ = ++pos_;
      return {};
    }
    if (lines_ == 0 && len > max_line) return too_long();
    if (++lines_ - 1 > limits_->max_header_count)
      return Err(431, "the request has more than " + std::to_string(limits_->max_header_count) +
                          " header lines");
    line_start_ = pos_ + 1;
  }
  if (lines_ == 0 && pos_ - line_start_ > max_line) return too_long();
  if (pos_ - begin_ > limits_->max_head_bytes)
    return Err(431, "the request head (request line and headers) is larger than " +
                        std::to_string(limits_->max_head_bytes) + " bytes");
  return {};
}

HttpError ParseRequestHead(std::string_view head, const HttpLimits& limits, HttpRequest* req) {
  *req = HttpRequest{};
  if (head.size() > limits.max_head_bytes)
    return Err(431, "the request head (request line and headers) is larger than " +
                        std::to_string(limits.max_head_bytes) + " bytes");
  size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return Err(400, "the request line does not end in CRLF");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return Err(400, "malformed request line: send 'METHOD /path HTTP/1.1'");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Err(400, "malformed request method");
  if (target.size() > limits.max_target_bytes)
    return Err(414, "the request target is " + std::to_string(target.size()) +
                        " bytes, more than the " + std::to_string(limits.max_target_bytes) +
                        " this server reads");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9')
    return Err(400, "malformed HTTP version in the request line");
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
    return Err(
        505, "HTTP version " + std::string(version.substr(5)) + " is not supported; send HTTP/1.1");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return Err(400, "the request target contains a control character or a space");
  std::string_view origin = target;
  if (origin.empty() || origin.front() != '/') {
    // absolute-form (RFC 9112 3.2.2): keep the path.
    const size_t scheme = origin.find("://");
    if (scheme == std::string_view::npos || origin.front() == '*')
      return Err(400, "the request target must be a path starting with '/'");
    const size_t slash = origin.find('/', scheme + 3);
    origin = slash == std::string_view::npos ? std::string_view("/") : origin.substr(slash);
  }
  req->method = std::string(method);
  req->target = std::string(origin);
  req->path = std::string(origin.substr(0, origin.find('?')));
  req->version_minor = version[7] - '0';

  size_t pos = eol + 2, count = 0;
  std::optional<uint64_t> content_length;
  bool transfer_encoding = false;
  for (;;) {
    const size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) return Err(400, "a header line does not end in CRLF");
    if (e == pos) break;
    const std::string_view hl = head.substr(pos, e - pos);
    pos = e + 2;
    if (++count > limits.max_header_count)
      return Err(431, "the request has more than " + std::to_string(limits.max_header_count) +
                          " header lines");
    if (hl.front() == ' ' || hl.front() == '\t')
      return Err(400, "folded header lines (starting with a blank) are not accepted");
    const size_t colon = hl.find(':');
    if (colon == std::string_view::npos || !IsToken(hl.substr(0, colon)))
      return Err(400, "malformed header line: send 'Name: value'");
    const std::string_view value = TrimBlanks(hl.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return Err(400, "a header value contains a control character");
    std::string name = Lower(hl.substr(0, colon));
    if (name == "content-length") {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return Err(400, "Content-Length must be a decimal number of bytes");
      const uint64_t n = std::stoull(std::string(value));
      if (content_length && *content_length != n)
        return Err(400, "the request has two different Content-Length headers");
      content_length = n;
    } else if (name == "transfer-encoding") {
      transfer_encoding = true;
    } else if (name == "connection") {
      if (ListHas(value, "close")) req->keep_alive = false;
    } else if (name == "expect") {
      if (Lower(value) != "100-continue")
        return Err(417, "Expect: " + std::string(value) + " is not supported");
      req->expect_continue = req->version_minor == 1;
    }
    req->headers.emplace_back(std::move(name), std::string(value));
  }
  if (transfer_encoding)
    return Err(411,
               "request bodies must be sent with a Content-Length header; Transfer-Encoding "
               "(chunked request bodies) is not accepted");
  if (req->version_minor == 0) req->keep_alive = false;
  req->content_length = content_length.value_or(0);
  if (req->content_length > limits.max_body_bytes)
    return Err(413, "the request body is " + std::to_string(req->content_length) +
                        " bytes, more than the " + std::to_string(limits.max_body_bytes) +
                        " this server accepts (serve --max-body)");
  return {};
}

// ---------------------------------------------------------------------------------------------
// Connections and exchanges.

namespace {

// What the I/O thread shares with the threads that write responses.
struct Shared {
  base::Reporter* rep = nullptr;
  std::function<HttpResponse(int, const std::string&)> error;  // error responses' shape
  std::atomic<uint64_t> refused{0};
  int wake_fd = -1;  // eventfd; owned here, closed by the destructor
  std::mutex mu;
  std::vector<uint64_t> woken;  // connection ids with new response bytes
  ~Shared() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  void Wake(uint64_t id) {
    {
      std::lock_guard<std::mutex> lock(mu);
      woken.push_back(id);
    }
    Poke();
  }
  void Poke() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }
};

// One accepted connection. Fields above `mu` belong to the I/O thread alone.
struct Conn {
  enum class St { kHead, kBody, kBusy, kLinger };
  uint64_t id = 0;
  int fd = -1;
  St st = St::kHead;
  std::string in;  // bytes read and not consumed
  HeadScanner scan;
  HttpRequest req;          // the request whose body is being read
  bool first_byte = false;  // of the current request
  bool peer_eof = false;    // read() returned 0: the client sends nothing more
  bool rdhup = false;       // the client shut down its side while a request was answered
  uint32_t events = 0;      // the epoll interest set
  Clock::time_point deadline;
  Clock::time_point last_write;  // last progress writing
  size_t reserved = 0;           // body bytes held against the budget
  size_t discarded = 0;          // bytes read and dropped while lingering
  std::string wbuf;              // bytes being written
  size_t wpos = 0;

  // The response being produced, from any thread.
  std::mutex mu;
  std::string out;  // appended by the exchange, moved to wbuf by the I/O thread
  bool response_done = false;
  bool close_after = false;
  bool woken = false;  // in Shared::woken already
  std::atomic<bool> dead{false};

  explicit Conn(const HttpLimits& l) : scan(l) {}
};

}  // namespace

struct HttpExchange::Impl {
  std::shared_ptr<Shared> shared;
  std::shared_ptr<Conn> conn;
  bool head_only = false;
  bool keep_alive = true;
  bool chunked = true;  // HTTP/1.0 has no chunked coding: its stream ends with the connection
  enum class State { kNew, kStreaming, kDone } state = State::kNew;  // guarded by conn->mu

  // Appends response bytes under conn->mu and wakes the I/O thread, if the exchange is in state
  // `from` (a response is given once; calls out of turn are ignored). False when ignored or once
  // the client is gone (the bytes are dropped).
  bool Post(std::string_view bytes, bool done, State from, State to) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(conn->mu);
      if (state != from) return false;
      state = to;
      if (conn->dead) return false;
      conn->out.append(bytes);
      if (done) {
        conn->response_done = true;
        conn->close_after = conn->close_after || !keep_alive;
      }
      if (conn->out.size() > kMaxUnsentBytes) conn->dead = true;  // the I/O thread closes it
      if (!conn->woken) conn->woken = wake = true;
    }
    if (wake) shared->Wake(conn->id);
    return !conn->dead;
  }
  void Answer(const HttpResponse& r) {
    std::string bytes = HeadBytes(r.status, r.content_type, r.headers, r.body.size(), !keep_alive);
    if (!head_only) bytes += r.body;
    Post(bytes, true, State::kNew, State::kDone);
  }
};

HttpExchange::HttpExchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpExchange::~HttpExchange() {
  if (!impl_) return;
  Impl& d = *impl_;
  d.Answer(d.shared->error(500, "the server dropped this request unanswered"));
  // A stream that was not ended cannot be ended cleanly: the connection closes after it.
  d.keep_alive = false;
  d.Post("", true, Impl::State::kStreaming, Impl::State::kDone);
}

void HttpExchange::Reply(const HttpResponse& r) { impl_->Answer(r); }

void HttpExchange::BeginStream(int status, const std::string& content_type,
                               const HttpHeaders& headers) {
  Impl& d = *impl_;
  std::string head = HeadBytes(status, content_type, headers, std::nullopt, !d.keep_alive);
  if (!d.chunked) {
    const std::string te = "Transfer-Encoding: chunked\r\n";
    head.erase(head.find(te), te.size());
  }
  d.Post(head, false, Impl::State::kNew, Impl::State::kStreaming);
}

bool HttpExchange::Write(std::string_view data) {
  if (data.empty()) return !gone();
  if (!impl_->chunked)
    return impl_->Post(data, false, Impl::State::kStreaming, Impl::State::kStreaming);
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string chunk = size;
  chunk.append(data);
  chunk += "\r\n";
  return impl_->Post(chunk, false, Impl::State::kStreaming, Impl::State::kStreaming);
}

void HttpExchange::EndStream() {
  impl_->Post(impl_->chunked ? "0\r\n\r\n" : "", true, Impl::State::kStreaming, Impl::State::kDone);
}

bool HttpExchange::gone() const { return impl_->conn->dead; }

// ---------------------------------------------------------------------------------------------
// The server.

struct HttpCore::Impl {
  HttpLimits limits;
  Handlers handlers;
  base::Reporter& rep;
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  int listen_fd = -1, epoll_fd = -1;
  std::thread io_thread;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;  // the I/O thread's
  uint64_t next_id = 2;
  size_t body_bytes = 0;  // reserved by bodies being read
  std::atomic<size_t> n_conns{0};
  bool listener_paused = false;
  Clock::time_point next_sweep;

  // Control, from other threads.
  std::atomic<bool> stop_accepting{false}, stop{false};
  std::atomic<int64_t> stop_deadline_ns{0};
  bool accepting_closed = false;  // the I/O thread's view

  // Workers.
  std::mutex wmu;
  std::condition_variable wcv;
  std::deque<std::function<void()>> tasks;
  bool workers_stop = false;
  std::vector<std::thread> workers;

  Impl(HttpLimits l, Handlers h, base::Reporter& r) : limits(l), handlers(std::move(h)), rep(r) {
    shared->rep = &r;
    shared->error = handlers.error ? handlers.error : [](int status, const std::string& m) {
      HttpResponse res;
      res.status = status;
      res.content_type = "text/plain; charset=utf-8";
      res.body = m + "\n";
      return res;
    };
  }

  void Listen(const std::string& host, int port);
  void Loop();
  void Accept();
  void OnEvent(const std::shared_ptr<Conn>& c, uint32_t ev);
  void ReadInput(const std::shared_ptr<Conn>& c);
  void Process(const std::shared_ptr<Conn>& c);
  void Dispatch(const std::shared_ptr<Conn>& c);
  void Refuse(const std::shared_ptr<Conn>& c, const HttpError& e);
  void SendLocal(const std::shared_ptr<Conn>& c, const HttpResponse& r, bool close);
  void Pump(const std::shared_ptr<Conn>& c);
  void ResponseComplete(const std::shared_ptr<Conn>& c);
  void Linger(const std::shared_ptr<Conn>& c);
  void Kill(const std::shared_ptr<Conn>& c);
  void SetEvents(Conn& c, uint32_t events);
  void UpdateEvents(Conn& c);
  void Sweep(Clock::time_point now);
  void CloseListener();
  void ReleaseBody(Conn& c) {
    body_bytes -= c.reserved;
    c.reserved = 0;
  }
  std::shared_ptr<HttpExchange> MakeExchange(const std::shared_ptr<Conn>& c, const HttpRequest& r,
                                             bool keep_alive) {
    auto impl = std::make_unique<HttpExchange::Impl>();
    impl->shared = shared;
    impl->conn = c;
    impl->head_only = r.method == "HEAD";
    impl->keep_alive = keep_alive;
    impl->chunked = r.version_minor >= 1;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->response_done = false;
      c->close_after = false;
    }
    return std::make_shared<HttpExchange>(std::move(impl));
  }
  void WorkerLoop();
};

void HttpCore::Impl::Listen(const std::string& host, int port) {
  ENGRAM_CHECK(port >= 0 && port <= 65535, Code::kInvalidArgument,
               "--port " << port << " is not a TCP port; use 1..65535, or 0 for any free port");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int gai = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res);
  ENGRAM_CHECK(gai == 0, Code::kInvalidArgument,
               "--host " << host << " is not an address of this machine (" << gai_strerror(gai)
                         << "); use 127.0.0.1, ::1 or 0.0.0.0");
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  std::string why;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR lets a restarted server bind while old connections sit in TIME_WAIT; on
    // Linux it never lets two sockets listen on one port. SO_REUSEPORT, which does, stays off:
    // a forgotten old server must make the new one fail, not split its traffic.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 511) == 0) {
      listen_fd = fd;
      break;
    }
    why = errno == EADDRINUSE ? "the address is already in use (another server, perhaps an "
                                "older engramctl serve, listens there)"
                              : std::strerror(errno);
    ::close(fd);
  }
  ENGRAM_CHECK(listen_fd >= 0, Code::kIo,
               "cannot listen on " << host << ":" << port << ": " << why
                                   << "; stop that server or pick another --port or --host");
}

void HttpCore::Impl::SetEvents(Conn& c, uint32_t events) {
  if (c.events == events) return;
  epoll_event e{};
  e.events = events;
  e.data.u64 = c.id;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &e);
  c.events = events;
}

// What a connection waits for in its state. While a request is answered nothing is read: a
// pipelining client waits in the kernel's buffers, not in ours; a client that shuts down its side
// is still noticed (EPOLLRDHUP), and a reset always is (EPOLLHUP, EPOLLERR).
void HttpCore::Impl::UpdateEvents(Conn& c) {
  constexpr uint32_t kIn = EPOLLIN, kOut = EPOLLOUT, kRdHup = EPOLLRDHUP, kNone = 0;
  const uint32_t out = c.wpos < c.wbuf.size() ? kOut : kNone;
  switch (c.st) {
    case Conn::St::kHead:
    case Conn::St::kBody:
    case Conn::St::kLinger:
      return SetEvents(c, out | (c.peer_eof ? kNone : kIn));
    case Conn::St::kBusy:
      return SetEvents(c, out | (c.rdhup || c.peer_eof ? kNone : kRdHup));
  }
}

void HttpCore::Impl::CloseListener() {
  if (listen_fd < 0) return;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
  ::close(listen_fd);
  listen_fd = -1;
}

void HttpCore::Impl::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop listening until the next sweep rather than spin on a
        // listener that stays readable.
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        listener_paused = true;
        rep.Log(LogLevel::kWarning, std::string("[serve] cannot accept connections: ") +
                                        std::strerror(errno) + " (" + std::to_string(conns.size()) +
                                        " open)");
      }
      return;  // EAGAIN, or a connection that went away before it was accepted
    }
    if (conns.size() >= limits.max_connections) {
      shared->refused++;
      const HttpResponse r = shared->error(503, "the server has " + std::to_string(conns.size()) +
                                                    " connections open, its limit; retry shortly");
      std::string bytes =
          HeadBytes(r.status, r.content_type, {{"Retry-After", "1"}}, r.body.size(), true) + r.body;
      [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      ::close(fd);
      continue;
    }
    const int one = 1;  // stream chunks are small: do not hold them back (Nagle)
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_shared<Conn>(limits);
    c->id = next_id++;
    c->fd = fd;
    c->deadline = Clock::now() + std::chrono::milliseconds(limits.head_timeout_ms);
    epoll_event e{};
    e.events = c->events = EPOLLIN;
    e.data.u64 = c->id;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e) != 0) {
      ::close(fd);
      continue;
    }
    conns.emplace(c->id, c);
    n_conns = conns.size();
  }
}

void HttpCore::Impl::Kill(const std::shared_ptr<Conn>& c) {
  if (c->fd < 0) return;
  c->dead = true;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  c->fd = -1;
  ReleaseBody(*c);
  conns.erase(c->id);
  n_conns = conns.size();
}

void HttpCore::Impl::Linger(const std::shared_ptr<Conn>& c) {
  ::shutdown(c->fd, SHUT_WR);
  c->st = Conn::St::kLinger;
  c->deadline = Clock::now() + kLinger;
  c->in.clear();
  c->in.shrink_to_fit();
  ReleaseBody(*c);
  UpdateEvents(*c);
}

void HttpCore::Impl::SendLocal(const std::shared_ptr<Conn>& c, const HttpResponse& r, bool close) {
  c->st = Conn::St::kBusy;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    std::string bytes = HeadBytes(r.status, r.content_type, r.headers, r.body.size(), close);
    if (c->req.method != "HEAD") bytes += r.body;
    c->out += bytes;
    c->response_done = true;
    c->close_after = close;
  }
  Pump(c);
}

void HttpCore::Impl::Refuse(const std::shared_ptr<Conn>& c, const HttpError& e) {
  shared->refused++;
  HttpResponse r = shared->error(e.status, e.message);
  if (e.status == 503) r.headers.emplace_back("Retry-After", "1");
  SendLocal(c, r, true);
}

// Moves the exchange's bytes to the socket; at the end of a response, goes on to the next
// request (in order: one request of a connection is handled at a time) or closes.
void HttpCore::Impl::Pump(const std::shared_ptr<Conn>& c) {
  if (c->fd < 0) return;
  bool done, close_after;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->woken = false;
    if (c->dead) {  // over kMaxUnsentBytes, or marked by a writer
      done = close_after = true;
    } else {
      if (c->wpos == c->wbuf.size()) {
        c->wbuf.clear();
        c->wpos = 0;
      }
      if (c->wbuf.empty()) c->last_write = Clock::now();
      c->wbuf += c->out;
      c->out.clear();
      done = c->response_done;
      close_after = c->close_after;
    }
  }
  if (c->dead) return Kill(c);
  while (c->wpos < c->wbuf.size()) {
    const ssize_t n =
        ::send(c->fd, c->wbuf.data() + c->wpos, c->wbuf.size() - c->wpos, MSG_NOSIGNAL);
    if (n > 0) {
      c->wpos += static_cast<size_t>(n);
      c->last_write = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return Kill(c);  // EPIPE, ECONNRESET: the client is gone
  }
  const bool pending = c->wpos < c->wbuf.size();
  UpdateEvents(*c);
  if (pending || !done || c->st != Conn::St::kBusy) return;
  c->wbuf.clear();
  c->wpos = 0;
  if (close_after || accepting_closed) return Linger(c);
  ResponseComplete(c);
}

void HttpCore::Impl::ResponseComplete(const std::shared_ptr<Conn>& c) {
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->response_done = false;
    c->close_after = false;
  }
  c->st = Conn::St::kHead;
  c->req = HttpRequest{};
  c->scan.Reset();
  c->first_byte = !c->in.empty();
  c->deadline = Clock::now() + std::chrono::milliseconds(c->first_byte ? limits.head_timeout_ms
                                                                       : limits.idle_timeout_ms);
  UpdateEvents(*c);
  Process(c);
}

void HttpCore::Impl::ReadInput(const std::shared_ptr<Conn>& c) {
  if (c->st == Conn::St::kBusy) return;
  char buf[kReadChunk];
  for (;;) {
    size_t want = sizeof buf;
    if (c->st == Conn::St::kBody) {
      // Exactly the body: what follows (a pipelined request) stays in the kernel.
      const size_t have = c->in.size();
      if (have >= c->req.content_length) return;
      want = std::min<size_t>(want, c->req.content_length - have);
    } else if (c->st == Conn::St::kHead && c->in.size() > limits.max_head_bytes) {
      return;  // the scanner refuses it
    }
    const ssize_t n = ::recv(c->fd, buf, want, 0);
    if (n > 0) {
      if (c->st == Conn::St::kLinger) {
        c->discarded += static_cast<size_t>(n);
        if (c->discarded > kMaxLingerBytes) return Kill(c);
        continue;
      }
      if (!c->first_byte && c->st == Conn::St::kHead) {
        c->first_byte = true;
        c->deadline = Clock::now() + std::chrono::milliseconds(limits.head_timeout_ms);
      }
      c->in.append(buf, static_cast<size_t>(n));
      if (c->st == Conn::St::kHead || static_cast<size_t>(n) < want) return;
      continue;
    }
    if (n == 0) {
      c->peer_eof = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c->peer_eof = true;
    return;
  }
}

void HttpCore::Impl::Process(const std::shared_ptr<Conn>& c) {
  for (;;) {
    if (c->fd < 0) return;
    switch (c->st) {
      case Conn::St::kLinger:
        if (c->peer_eof) Kill(c);
        return;
      case Conn::St::kBusy:
        return;
      case Conn::St::kHead: {
        if (accepting_closed) return Kill(c);
        if (HttpError e = c->scan.Scan(c->in); e.status) return Refuse(c, e);
        if (!c->scan.head_size()) {
          if (c->peer_eof) Kill(c);
          return;
        }
        const size_t begin = c->scan.head_begin(), size = c->scan.head_size();
        HttpError e =
            ParseRequestHead(std::string_view(c->in).substr(begin, size), limits, &c->req);
        c->in.erase(0, begin + size);
        c->scan.Reset();
        if (e.status) return Refuse(c, e);
        const uint64_t len = c->req.content_length;
        if (len > 0 && body_bytes + len > limits.body_budget_bytes)
          return Refuse(c, {503,
                            "the server is reading too many request bodies at once; retry "
                            "shortly"});
        std::optional<HttpResponse> early;
        try {
          early = handlers.admit(c->req);
        } catch (const std::exception& ex) {
          early = shared->error(500, std::string("internal error: ") + ex.what());
        }
        if (early) {
          // A body that was announced and not read leaves the connection unusable.
          SendLocal(c, *early, len > 0 || !c->req.keep_alive);
          return;
        }
        if (len == 0) return Dispatch(c);
        c->reserved = len;
        body_bytes += len;
        c->st = Conn::St::kBody;
        c->deadline = Clock::now() + std::chrono::milliseconds(limits.body_timeout_ms);
        c->in.reserve(len);
        if (c->req.expect_continue && c->in.size() < len) {
          std::lock_guard<std::mutex> lock(c->mu);
          c->out += "HTTP/1.1 100 Continue\r\n\r\n";
        }
        if (c->in.size() < len) {
          ReadInput(c);
          Pump(c);  // the 100 Continue, if any
        }
        continue;
      }
      case Conn::St::kBody:
        if (c->in.size() >= c->req.content_length) return Dispatch(c);
        if (c->peer_eof) Kill(c);
        return;
    }
  }
}

void HttpCore::Impl::Dispatch(const std::shared_ptr<Conn>& c) {
  HttpRequest req = std::move(c->req);
  c->req = HttpRequest{};
  c->req.method = req.method;  // SendLocal's HEAD check
  if (req.content_length) {
    req.body = c->in.substr(0, req.content_length);
    c->in.erase(0, req.content_length);
  }
  ReleaseBody(*c);
  c->st = Conn::St::kBusy;
  UpdateEvents(*c);
  auto ex = MakeExchange(c, req, req.keep_alive);
  {
    std::lock_guard<std::mutex> lock(wmu);
    tasks.emplace_back([this, req = std::move(req), ex = std::move(ex)]() mutable {
      try {
        handlers.handle(std::move(req), ex);
      } catch (const std::exception& e) {
        rep.Log(LogLevel::kWarning, std::string("[serve] request handler failed: ") + e.what());
        ex->Reply(shared->error(500, std::string("internal error: ") + e.what()));
      }
    });
  }
  wcv.notify_one();
}

void HttpCore::Impl::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(wmu);
      wcv.wait(lock, [&] { return workers_stop || !tasks.empty(); });
      if (tasks.empty()) return;
      task = std::move(tasks.front());
      tasks.pop_front();
    }
    task();  // catches everything itself
  }
}

void HttpCore::Impl::OnEvent(const std::shared_ptr<Conn>& c, uint32_t ev) {
  if (ev & EPOLLERR) return Kill(c);
  if (ev & EPOLLHUP) {  // both directions closed (or reset): nobody reads a response any more
    if (c->st == Conn::St::kLinger || c->st == Conn::St::kBusy) return Kill(c);
    c->peer_eof = true;
  }
  if (ev & EPOLLOUT) {
    Pump(c);
    if (c->fd < 0) return;
  }
  if ((ev & EPOLLRDHUP) && c->st == Conn::St::kBusy) {
    // The client shut down its side: it may still read the answer (and its pipelined
    // requests, read after this one), so keep going but stop watching.
    c->rdhup = true;
    UpdateEvents(*c);
    return;
  }
  if (ev & EPOLLIN) ReadInput(c);
  Process(c);
  if (c->fd >= 0) UpdateEvents(*c);
}

void HttpCore::Impl::Sweep(Clock::time_point now) {
  if (listener_paused && listen_fd >= 0 && !accepting_closed) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = kListenerTag;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &e) == 0) listener_paused = false;
  }
  std::vector<std::shared_ptr<Conn>> expired;
  for (auto& [id, c] : conns) {
    switch (c->st) {
      case Conn::St::kHead:
      case Conn::St::kBody:
      case Conn::St::kLinger:
        if (now >= c->deadline) expired.push_back(c);
        break;
      case Conn::St::kBusy:
        if (c->wpos < c->wbuf.size() &&
            now - c->last_write > std::chrono::milliseconds(limits.write_timeout_ms))
          expired.push_back(c);
        break;
    }
  }
  for (auto& c : expired) {
    if (c->fd < 0) continue;
    if ((c->st == Conn::St::kHead && c->first_byte) || c->st == Conn::St::kBody) {
      Refuse(c, {408, c->st == Conn::St::kBody
                          ? "the request body did not arrive within " +
                                std::to_string(limits.body_timeout_ms / 1000) + " s"
                          : "the request head did not arrive within " +
                                std::to_string(limits.head_timeout_ms / 1000) + " s"});
    } else {
      Kill(c);  // idle, lingering, or a client that stopped reading
    }
  }
}

void HttpCore::Impl::Loop() {
  epoll_event evs[128];
  next_sweep = Clock::now() + kSweepEvery;
  for (;;) {
    const auto now = Clock::now();
    if (stop_accepting && !accepting_closed) {
      accepting_closed = true;
      CloseListener();
      std::vector<std::shared_ptr<Conn>> idle;
      for (auto& [id, c] : conns)
        if (c->st != Conn::St::kBusy) idle.push_back(c);
      for (auto& c : idle) Kill(c);
    }
    if (stop) {
      // Done when every response is out; lingering connections (a client still sending after
      // its answer) hold no one's answer.
      const auto deadline = Clock::time_point(Clock::duration(stop_deadline_ns.load()));
      const bool answered = std::all_of(conns.begin(), conns.end(), [](const auto& kv) {
        return kv.second->st == Conn::St::kLinger;
      });
      if (answered || now >= deadline) break;
    }
    if (now >= next_sweep) {
      Sweep(now);
      next_sweep = now + kSweepEvery;
    }
    const int timeout_ms = static_cast<int>(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(next_sweep - now).count()));
    const int n = ::epoll_wait(epoll_fd, evs, std::size(evs), timeout_ms);
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = evs[i].data.u64;
      try {
        if (tag == kListenerTag) {
          if (listen_fd >= 0) Accept();
        } else if (tag == kWakeTag) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(shared->wake_fd, &v, sizeof v);
          std::vector<uint64_t> woken;
          {
            std::lock_guard<std::mutex> lock(shared->mu);
            woken.swap(shared->woken);
          }
          for (uint64_t id : woken)
            if (auto it = conns.find(id); it != conns.end())
              Pump(std::shared_ptr<Conn>(it->second));
        } else if (auto it = conns.find(tag); it != conns.end()) {
          OnEvent(std::shared_ptr<Conn>(it->second), evs[i].events);
        }
      } catch (const std::exception& e) {  // allocation failure: drop that connection only
        rep.Log(LogLevel::kWarning, std::string("[serve] connection dropped: ") + e.what());
        if (auto it = conns.find(tag); tag > kWakeTag && it != conns.end())
          Kill(std::shared_ptr<Conn>(it->second));
      }
    }
  }
  CloseListener();
  std::vector<std::shared_ptr<Conn>> all;
  for (auto& [id, c] : conns) all.push_back(c);
  for (auto& c : all) Kill(c);
}

HttpCore::HttpCore(HttpLimits limits, Handlers handlers, base::Reporter& rep)
    : impl_(std::make_unique<Impl>(limits, std::move(handlers), rep)) {}

HttpCore::~HttpCore() { Stop(std::chrono::steady_clock::now()); }

int HttpCore::Start(const std::string& host, int port) {
  Impl& d = *impl_;
  // Every connection is a descriptor: make sure the soft limit allows the connection limit.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = d.limits.max_connections + 256;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
      rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  d.Listen(host, port);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(d.listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = ss.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  d.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  d.shared->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ENGRAM_CHECK(d.epoll_fd >= 0 && d.shared->wake_fd >= 0, Code::kIo,
               "cannot set up the HTTP event loop: " << std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenerTag;
  ::epoll_ctl(d.epoll_fd, EPOLL_CTL_ADD, d.listen_fd, &e);
  e.data.u64 = kWakeTag;
  ::epoll_ctl(d.epoll_fd, EPOLL_CTL_ADD, d.shared->wake_fd, &e);
  for (int i = 0; i < std::max(1, d.limits.workers); ++i)
    d.workers.emplace_back([&d] { d.WorkerLoop(); });
  d.io_thread = std::thread([&d] {
    try {
      d.Loop();
    } catch (const std::exception& ex) {
      d.rep.Log(LogLevel::kWarning, std::string("[serve] the HTTP loop stopped: ") + ex.what());
    }
  });
  return bound;
}

void HttpCore::StopAccepting() {
  impl_->stop_accepting = true;
  if (impl_->shared->wake_fd >= 0) impl_->shared->Poke();
}

void HttpCore::Stop(std::chrono::steady_clock::time_point deadline) {
  Impl& d = *impl_;
  if (d.io_thread.joinable()) {
    d.stop_accepting = true;
    d.stop_deadline_ns = deadline.time_since_epoch().count();
    d.stop = true;
    d.shared->Poke();
    d.io_thread.join();
  }
  {
    std::lock_guard<std::mutex> lock(d.wmu);
    d.workers_stop = true;
  }
  d.wcv.notify_all();
  for (auto& t : d.workers)
    if (t.joinable()) t.join();
  d.workers.clear();
  if (d.epoll_fd >= 0) ::close(d.epoll_fd);
  d.epoll_fd = -1;
  if (d.listen_fd >= 0) ::close(d.listen_fd);
  d.listen_fd = -1;
}

uint64_t HttpCore::refused() const { return impl_->shared->refused; }
size_t HttpCore::connections() const { return impl_->n_conns; }

}  // namespace engram::serve

// serve's HTTP/1.1 layer (engram::serve, http.cc): strict request-head parsing and its limits,
// the incremental head scanner, and the server itself over loopback sockets with a trivial
// handler: pipelining in order, limits answered before the body is read, slow clients that hold
// no worker, streamed (chunked) responses, and a port in use refused.
#include "engram/serve/http.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engram/base/error.h"

using namespace engram::serve;
using Clock = std::chrono::steady_clock;

namespace {

HttpError Parse(const std::string& head, HttpRequest* req, HttpLimits limits = {}) {
  return ParseRequestHead(head, limits, req);
}

// A loopback client socket with a receive deadline.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~Client() { ::close(fd_); }
  void Send(const std::string& s) {
    REQUIRE(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
  }
  // Everything until the server closes or `ms` pass (or `until` appears).
  std::string Read(int ms, const std::string& until = "") {
    std::string got;
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (::poll(&p, 1, std::max(1, left)) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (!until.empty() && got.find(until) != std::string::npos) break;
    }
    return got;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A server whose handler answers "PATH:BODY", "/slow" after 200 ms, "/stream" in three chunks.
struct TestServer {
  HttpLimits limits;
  std::unique_ptr<HttpCore> core;
  int port = 0;
  std::atomic<int> handled{0};

  explicit TestServer(HttpLimits l = {}) : limits(l) {
    HttpCore::Handlers h;
    h.admit = [](const HttpRequest& head) -> std::optional<HttpResponse> {
      if (head.path == "/secret" && !head.Header("authorization")) {
        HttpResponse r;
        r.status = 401;
        r.body = "key";
        return r;
      }
      return std::nullopt;
    };
    h.handle = [this](HttpRequest req, std::shared_ptr<HttpExchange> ex) {
      ++handled;
      if (req.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (req.path == "/stream") {
        std::thread([ex] {
          ex->BeginStream(200, "text/event-stream", {});
          for (int i = 0; i < 3; ++i) ex->Write("data: " + std::to_string(i) + "\n\n");
          ex->EndStream();
        }).detach();
        return;
      }
      if (req.path == "/drop") return;  // unanswered: the exchange answers 500
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = req.path + ":" + req.body;
      ex->Reply(r);
    };
    h.error = [](int status, const std::string& m) {
      HttpResponse r;
      r.status = status;
      r.body = "{\"error\":\"" + m + "\"}";
      return r;
    };
    core = std::make_unique<HttpCore>(limits, std::move(h), engram::base::Silent());
    port = core->Start("127.0.0.1", 0);
  }
};

}  // namespace

TEST_CASE("a request head is parsed strictly") {
  HttpRequest r;
  CHECK(Parse("GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Thing:  v \r\n\r\n", &r).status == 0);
  CHECK(r.method == "GET");
  CHECK(r.path == "/v1/models");
  CHECK(r.target == "/v1/models?x=1");
  CHECK(r.keep_alive);
  REQUIRE(r.Header("x-thing"));
  CHECK(*r.Header("x-thing") == "v");
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: 12\r\ncontent-length: 12\r\n\r\n", &r).status ==
        0);
  CHECK(r.content_length == 12);
  CHECK(Parse("GET http://h:1/a/b HTTP/1.1\r\n\r\n", &r).status == 0);
  CHECK(r.path == "/a/b");
  CHECK(Parse("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n", &r).status == 0);
  CHECK(!r.keep_alive);
  CHECK(Parse("GET / HTTP/1.0\r\n\r\n", &r).status == 0);
  CHECK(!r.keep_alive);
  CHECK(Parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", &r).status ==
        0);
  CHECK(r.expect_continue);

  CHECK(Parse("GET  / HTTP/1.1\r\n\r\n", &r).status == 400);
  CHECK(Parse("GET / HTTP/1.1\n\n", &r).status == 400);
  CHECK(Parse("GET / HTTP/2.0\r\n\r\n", &r).status == 505);
  CHECK(Parse("GET / HTTX/1.1\r\n\r\n", &r).status == 400);
  CHECK(Parse("GET nopath HTTP/1.1\r\n\r\n", &r).status == 400);
  CHECK(Parse("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", &r).status == 400);
  CHECK(Parse("GET / HTTP/1.1\r\nBad Name: b\r\n\r\n", &r).status == 400);
  CHECK(Parse("GET / HTTP/1.1\r\n: b\r\n\r\n", &r).status == 400);
  CHECK(Parse(std::string("GET / HTTP/1.1\r\nA: b") + '\0' + "c\r\n\r\n", &r).status == 400);
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: 1a\r\n\r\n", &r).status == 400);
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &r).status == 400);
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &r).status ==
        400);
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", &r).status == 400);
  CHECK(Parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r).status == 411);
  CHECK(Parse("GET / HTTP/1.1\r\nExpect: magic\r\n\r\n", &r).status == 417);
  const HttpError big = Parse("POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", &r);
  CHECK(big.status == 413);
  CHECK(big.message.find("1048577") != std::string::npos);
  CHECK(Parse("POST / HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n", &r).status == 0);
  CHECK(Parse("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", &r).status == 414);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 65; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  CHECK(Parse(many + "\r\n", &r).status == 431);
}

TEST_CASE("the head scanner refuses an over-limit head before it ends") {
  HttpLimits l;
  HeadScanner s(l);
  const std::string head = "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next";
  for (size_t i = 1; i <= head.size() && !s.head_size(); ++i)
    CHECK(s.Scan(std::string_view(head).substr(0, i)).status == 0);
  CHECK(s.head_begin() == 2);
  CHECK(s.head_size() == std::string("GET / HTTP/1.1\r\nHost: a\r\n\r\n").size());

  HeadScanner lines(l);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 65; ++i) many += "X: v\r\n";  // no end yet
  CHECK(lines.Scan(many).status == 431);
  HeadScanner line(l);
  CHECK(line.Scan("GET /" + std::string(9000, 'a')).status == 414);  // no CRLF yet
  HeadScanner bytes(l);
  CHECK(bytes.Scan("GET / HTTP/1.1\r\nX: " + std::string(40000, 'v')).status == 431);
  HeadScanner blank(l);
  CHECK(blank.Scan("\r\n\r\n\r\n\r\n\r\nGET").status == 400);
}

TEST_CASE("pipelined requests are answered in order on one connection") {
  TestServer s;
  Client c(s.port);
  c.Send(
      "POST /slow HTTP/1.1\r\nContent-Length: 1\r\n\r\nA"
      "GET /b HTTP/1.1\r\n\r\n"
      "POST /c HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nCC");
  const std::string got = c.Read(5000);
  CHECK(Count(got, "HTTP/1.1 200 OK") == 3);
  const size_t a = got.find("/slow:A"), b = got.find("/b:"), cc = got.find("/c:CC");
  CHECK(a != std::string::npos);
  CHECK(b != std::string::npos);
  CHECK(cc != std::string::npos);
  CHECK(a < b);
  CHECK(b < cc);
  CHECK(got.find("Connection: close") != std::string::npos);
}

TEST_CASE("limits are answered from the head: the body is never read") {
  TestServer s;
  {
    Client c(s.port);  // announces 512 MB, sends 1 KB
    c.Send("POST /x HTTP/1.1\r\nContent-Length: 536870912\r\n\r\n" + std::string(1024, 'x'));
    const std::string got = c.Read(3000, "}");
    CHECK(got.rfind("HTTP/1.1 413 Content Too Large\r\n", 0) == 0);
    CHECK(got.find("Connection: close") != std::string::npos);
  }
  {
    Client c(s.port);  // auth is decided before the body, too
    c.Send("POST /secret HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    const std::string got = c.Read(3000, "key");
    CHECK(got.rfind("HTTP/1.1 401 Unauthorized\r\n", 0) == 0);
  }
  {
    Client c(s.port);
    std::string h = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 100; ++i) h += "X-Pad: " + std::string(100, 'p') + "\r\n";
    c.Send(h);
    CHECK(c.Read(3000, "}").rfind("HTTP/1.1 431 ", 0) == 0);
  }
  {
    Client c(s.port);
    c.Send("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    CHECK(c.Read(3000, "}").rfind("HTTP/1.1 411 ", 0) == 0);
  }
  {
    Client c(s.port);  // 100-continue: the interim answer first, then the real one
    c.Send("POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    CHECK(c.Read(3000, "\r\n\r\n") == "HTTP/1.1 100 Continue\r\n\r\n");
    c.Send("ok");
    CHECK(c.Read(3000, "/e:ok").find("/e:ok") != std::string::npos);
  }
  CHECK(s.handled == 1);
  CHECK(s.core->refused() == 3);
}

TEST_CASE("slow clients hold no worker and time out") {
  HttpLimits l;
  l.workers = 1;
  l.head_timeout_ms = 600;
  TestServer s(l);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<Client>(s.port));
    slow.back()->Send("GET / HTTP/1.1\r\nX-A: ");
  }
  const auto t0 = Clock::now();
  Client c(s.port);
  c.Send("GET /fast HTTP/1.1\r\n\r\n");
  CHECK(c.Read(2000, "/fast:").find("/fast:") != std::string::npos);
  CHECK(Clock::now() - t0 < std::chrono::seconds(1));
  // Past the head deadline the slow ones get 408 and are closed.
  CHECK(slow[0]->Read(3000).rfind("HTTP/1.1 408 ", 0) == 0);
}

TEST_CASE("streams are chunked; an unanswered exchange answers 500") {
  TestServer s;
  Client c(s.port);
  c.Send("GET /stream HTTP/1.1\r\n\r\n");
  const std::string got = c.Read(3000, "0\r\n\r\n");
  CHECK(got.find("Transfer-Encoding: chunked") != std::string::npos);
  CHECK(got.find("9\r\ndata: 2\n\n\r\n0\r\n\r\n") != std::string::npos);
  c.Send("GET /drop HTTP/1.1\r\n\r\n");  // the same connection goes on
  CHECK(c.Read(3000, "}").rfind("HTTP/1.1 500 ", 0) == 0);
}

TEST_CASE("a port in use is an error naming host:port") {
  TestServer s;
  HttpCore second(HttpLimits{}, {}, engram::base::Silent());
  try {
    second.Start("127.0.0.1", s.port);
    FAIL("a second server started on a port in use");
  } catch (const engram::Error& e) {
    CHECK(e.code() == engram::Code::kIo);
    CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(s.port) +
                                     ": the address is already in use") != std::string::npos);
  }
}

TEST_CASE("stopping closes idle and half-read connections at once") {
  TestServer s;
  Client idle(s.port), half(s.port);
  half.Send("GET / HTTP/1.1\r\nX: ");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  s.core->StopAccepting();
  s.core->Stop(Clock::now() + std::chrono::seconds(5));
  CHECK(Clock::now() - t0 < std::chrono::seconds(1));
  CHECK(half.Read(1000).empty());  // closed without an answer
}

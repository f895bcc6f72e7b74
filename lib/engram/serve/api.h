// The boundary between engramctl and libengram_serve.so, the HTTP module (cpp-httplib, OpenSSL,
// brotli): engramctl loads it on demand (loader.cc), so that only `serve` and `run --remote` pay
// for those libraries at start-up. Errors cross as (code, message), not as exceptions.
#pragma once

#include <memory>
#include <string>

#include "engram/base/reporter.h"
#include "engram/model/session.h"
#include "engram/serve/client.h"
#include "engram/serve/server.h"

namespace engram::serve {

inline constexpr const char* kServeApiSymbol = "engram_serve_api_v1";

// The HTTP server behind Server (defined in server.cc, used only through the table below).
struct HttpServer;

// RemoteChat over HTTP (client.cc).
RemoteReply HttpRemoteChat(const RemoteOptions& o);

// Each call that can fail returns a status (base/module_status.h): 0, or 1 + an engram::Code
// with *error set; engramctl calls them through base::CallModule.
struct ServeApi {
  int (*create)(const ServeOptions* opts, base::Reporter* rep, HttpServer** out,
                std::string* error);
  int (*start)(HttpServer* s, int* port, std::string* error);
  void (*set_session)(HttpServer* s, model::Session* session);  // takes ownership
  void (*shutdown)(HttpServer* s);
  void (*destroy)(HttpServer* s);
  int (*remote_chat)(const RemoteOptions* o, RemoteReply* out, std::string* error);
};

}  // namespace engram::serve

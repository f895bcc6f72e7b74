// engramctl's side of the HTTP module: Server and RemoteChat load libengram_serve.so on first use
// (found as the model module is) and call it through its ServeApi table.
#include <dlfcn.h>

#include <utility>

#include "engram/base/error.h"
#include "engram/model/plugin.h"
#include "engram/serve/api.h"

namespace engram::serve {

namespace {

const ServeApi& Api() {
  static const ServeApi* api = [] {
    std::string errors;
    void* h = model::OpenPluginLibrary("libengram_serve.so", "ENGRAM_SERVE_PLUGIN", &errors);
    ENGRAM_CHECK(h != nullptr, Code::kInternal,
                 "the HTTP module (libengram_serve.so) is missing next to engramctl (in ../lib or "
                 "the same directory); reinstall engramctl or set ENGRAM_SERVE_PLUGIN to its path"
                     << errors);
    using Fn = const ServeApi* (*)();
    auto fn = reinterpret_cast<Fn>(::dlsym(h, kServeApiSymbol));
    ENGRAM_CHECK(fn != nullptr, Code::kInternal,
                 "libengram_serve.so has no " << kServeApiSymbol
                                              << "; it belongs to another engramctl version");
    return fn();
  }();
  return *api;
}

// 0, or 1 + the Code of the error the module caught.
void Check(int status, const std::string& error) {
  if (status != 0) throw Error(static_cast<Code>(status - 1), error);
}

}  // namespace

struct Server::Impl {
  const ServeApi* api = nullptr;
  HttpServer* s = nullptr;
};

Server::Server(ServeOptions opts, base::Reporter& rep) : impl_(std::make_unique<Impl>()) {
  impl_->api = &Api();
  std::string error;
  Check(impl_->api->create(&opts, &rep, &impl_->s, &error), error);
}

Server::~Server() {
  if (impl_->s) impl_->api->destroy(impl_->s);  // shuts down first
}

int Server::Start() {
  int port = -1;
  std::string error;
  Check(impl_->api->start(impl_->s, &port, &error), error);
  return port;
}

void Server::SetSession(std::unique_ptr<model::Session> session) {
  impl_->api->set_session(impl_->s, session.release());
}

void Server::Shutdown() { impl_->api->shutdown(impl_->s); }

RemoteReply RemoteChat(const RemoteOptions& o) {
  RemoteReply r;
  std::string error;
  Check(Api().remote_chat(&o, &r, &error), error);
  return r;
}

}  // namespace engram::serve

// engramctl's side of the HTTP module: Server and RemoteChat load libengram_serve.so on first use
// (found as the model module is) and call it through its ServeApi table.
#include <dlfcn.h>

#include <utility>

#include "engram/base/error.h"
#include "engram/base/module_status.h"
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

}  // namespace

struct Server::Impl {
  const ServeApi* api = nullptr;
  HttpServer* s = nullptr;
};

Server::Server(ServeOptions opts, base::Reporter& rep) : impl_(std::make_unique<Impl>()) {
  impl_->api = &Api();
  base::CallModule(impl_->api->create, &opts, &rep, &impl_->s);
}

Server::~Server() {
  if (impl_->s) impl_->api->destroy(impl_->s);  // shuts down first
}

int Server::Start() {
  int port = -1;
  base::CallModule(impl_->api->start, impl_->s, &port);
  return port;
}

void Server::SetSession(std::unique_ptr<model::Session> session) {
  impl_->api->set_session(impl_->s, session.release());
}

void Server::Shutdown() { impl_->api->shutdown(impl_->s); }

RemoteReply RemoteChat(const RemoteOptions& o) {
  RemoteReply r;
  base::CallModule(Api().remote_chat, &o, &r);
  return r;
}

}  // namespace engram::serve

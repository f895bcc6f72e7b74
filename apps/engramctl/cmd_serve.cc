// `engramctl serve`: flags -> serve::ServeOptions + the model plugin's session; answers /health
// with 503 while the model loads, drains in-flight requests on SIGTERM/SIGINT (for at most
// --grace seconds) and exits 0.
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include "cli_common.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/config/config.h"
#include "engram/model/session.h"
#include "engram/serve/server.h"

namespace engramctl {

void AddServeCommand(CLI::App& app) {
  struct Flags {
    engram::model::RunOptions run;
    engram::serve::ServeOptions serve;
    bool no_auth = false;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "serve", "Serve the local MoE+Engram model over an OpenAI-compatible HTTP API");
  AddModelFlags(s, &f->run);
  s->add_option("--host", f->serve.host, "Address to listen on")->capture_default_str();
  s->add_option("--port", f->serve.port, "Port to listen on (0 = any free port)")
      ->capture_default_str();
  s->add_option("--queue", f->serve.queue_capacity,
                "Requests that may wait for a batch slot; beyond them 503 with Retry-After "
                "(default: 4 x batch)");
  s->add_option("--max-body", f->serve.max_body_bytes,
                "Largest request body in bytes (K/M suffixes: 1K = 1024); larger ones get 413 "
                "before they are read")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(size_t{1}, size_t{1} << 30))
      ->capture_default_str();
  s->add_option("--grace", f->serve.grace_seconds,
                "Seconds SIGTERM/SIGINT lets in-flight requests finish; then the rest are "
                "cancelled (503) and serve exits within about a second more")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  s->footer(
      "Limits, checked before a request's body is read and before authentication "
      "(schemas/http_api.md): a body larger than --max-body gets 413, a target over 8 KiB 414, "
      "a request head over 32 KiB or 64 header lines 431; a head must arrive within 10 s and a "
      "body within 30 s (408); at most 512 connections are open. SIGTERM/SIGINT: stop accepting, "
      "let in-flight requests finish for up to --grace seconds (default 10), cancel the rest "
      "(503), exit 0.");
  s->add_flag("--json", f->json,
              "Print one JSON line on stdout when ready ({\"event\": \"ready\", \"url\", "
              "\"port\", \"model\", \"max_batch\", \"auth\", \"pid\"}) and one when stopped; "
              "the [serve] log stays on stderr");
  s->add_option("--trace", f->run.trace_path,
                "Append each request's canonical ids (prompt and generated tokens) to FILE, u32 "
                "with 0xFFFFFFFF after each request: the input of 'hotset --tokens FILE' and "
                "'prefetch --hot FILE'");
  s->add_flag("--no-auth", f->no_auth,
              "Serve without authentication even though [api] api_key_env names a key variable "
              "(by default the server requires that key, and refuses to start without it)");
  s->callback([f] {
    StderrReporter rep;
    auto& so = f->serve;
    so.config_path = f->run.config_path;
    if (!f->run.config_path.empty()) {
      // Read here only for [api]; the session loads it again and reports its notes.
      engram::config::Config cfg = engram::config::Load(f->run.config_path);
      so.api_key_env = cfg.api.api_key_env;
      if (f->no_auth) {
        if (!cfg.api.api_key_env.empty())
          rep.Log(engram::base::LogLevel::kWarning,
                  "[serve] --no-auth: serving WITHOUT authentication although " +
                      cfg.Where("api.api_key_env") + " names $" + cfg.api.api_key_env);
      } else {
        so.api_key = engram::config::ResolveApiKey(
            cfg, "or start serve with --no-auth to serve without authentication");
      }
    }
    // SIGTERM/SIGINT are taken by sigwait below: block them before any thread starts so that
    // every thread inherits the mask and none is interrupted.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    engram::serve::Server server(so, rep);
    const int port = server.Start();
    rep.Log(engram::base::LogLevel::kInfo, "[serve] listening on http://" + so.host + ":" +
                                               std::to_string(port) + " (loading the model)");
    // Test aid (documented in schemas/cli.md): hold the loading phase so that a test can observe
    // /health answering 503 on any machine speed.
    if (const char* d = std::getenv("ENGRAM_SERVE_LOAD_DELAY_MS"); d && *d)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(d)));
    engram::model::Session* raw = nullptr;
    try {
      engram::base::CallModule(engram::model::LoadSessionPlugin(), &f->run, &rep, &raw);
    } catch (...) {
      server.Shutdown();
      throw;
    }
    std::unique_ptr<engram::model::Session> session(raw);
    const auto& info = session->info();
    rep.Log(engram::base::LogLevel::kInfo,
            "[serve] ready: model " + info.model_name + ", batches of up to " +
                std::to_string(info.max_batch) + " requests, " +
                (so.api_key ? "Bearer key required (from $" + so.api_key_env + ")"
                            : std::string("no authentication")));
    const std::string model_name = info.model_name;
    const int max_batch = info.max_batch;
    server.SetSession(std::move(session));
    if (f->json)
      PrintStdout("{\"event\":\"ready\",\"url\":" +
                  engram::base::JsonString("http://" + so.host + ":" + std::to_string(port)) +
                  ",\"port\":" + std::to_string(port) +
                  ",\"model\":" + engram::base::JsonString(model_name) + ",\"max_batch\":" +
                  std::to_string(max_batch) + ",\"auth\":" + (so.api_key ? "true" : "false") +
                  ",\"pid\":" + std::to_string(::getpid()) + "}");
    int sig = 0;
    sigwait(&sigs, &sig);
    rep.Log(engram::base::LogLevel::kInfo, std::string("[serve] ") +
                                               (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                                               ": finishing in-flight requests, then exiting");
    server.Shutdown();
    rep.Log(engram::base::LogLevel::kInfo, "[serve] stopped");
    if (f->json)
      PrintStdout(std::string("{\"event\":\"stopped\",\"signal\":\"") +
                  (sig == SIGTERM ? "SIGTERM" : "SIGINT") + "\"}");
  });
}

}  // namespace engramctl

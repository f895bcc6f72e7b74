// `engramctl serve`: flags -> serve::ServeOptions + the model plugin's session; answers /health
// with 503 while the model loads, drains in-flight requests on SIGTERM/SIGINT and exits 0.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include "cli_common.h"
#include "engram/base/module_status.h"
#include "engram/config/config.h"
#include "engram/model/session.h"
#include "engram/serve/server.h"

namespace engramctl {

void AddServeCommand(CLI::App& app) {
  struct Flags {
    engram::model::RunOptions run;
    engram::serve::ServeOptions serve;
    bool require_key = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "serve", "Serve the local MoE+Engram model over an OpenAI-compatible HTTP API");
  s->add_option("--config", f->run.config_path,
                "config.toml ([model], [engram], [engram.table], [inference], [api])");
  s->add_option("-m,--model", f->run.model_dir, "Model directory (overrides [model] path)");
  s->add_option("--table", f->run.table_path,
                "Engram table (overrides [engram.table] path and ENGRAM_TABLE_PATH)");
  s->add_option("--host", f->serve.host, "Address to listen on")->capture_default_str();
  s->add_option("--port", f->serve.port, "Port to listen on (0 = any free port)")
      ->capture_default_str();
  s->add_option("-t,--threads", f->run.threads, "Compute threads (default: all cores)");
  s->add_option("--device", f->run.device, "cpu (default: [model] device)");
  s->add_option("--dtype", f->run.dtype, "float32 | bfloat16 (default: [model] dtype)");
  s->add_option("--batch", f->run.max_batch,
                "Requests generated together (default: [inference] max_batch_size)");
  s->add_option("--queue", f->serve.queue_capacity,
                "Requests that may wait for a batch slot before 503 (default: 4 x batch)");
  s->add_flag("--require-key", f->require_key,
              "Refuse to start when [api] api_key_env names an unset variable (default: warn "
              "and serve without authentication)");
  s->callback([f] {
    StderrReporter rep;
    auto& so = f->serve;
    so.config_path = f->run.config_path;
    if (!f->run.config_path.empty()) {
      // Read here only for [api]; the session loads it again and reports its notes.
      engram::config::Config cfg = engram::config::Load(f->run.config_path);
      so.api_key_env = cfg.api.api_key_env;
      if (!cfg.api.api_key_env.empty()) {
        so.api_key = engram::config::ApiKey(cfg);
        if (!so.api_key || so.api_key->empty()) {
          so.api_key.reset();
          const std::string what = cfg.Where("api.api_key_env") + " names $" + cfg.api.api_key_env +
                                   ", which is not set";
          ENGRAM_CHECK(!f->require_key, engram::Code::kConfig,
                       what << "; export " << cfg.api.api_key_env
                            << " with the key clients will send, or start without --require-key");
          rep.Log(engram::base::LogLevel::kWarning,
                  "[serve] " + what +
                      ": serving WITHOUT authentication; export it to require "
                      "'Authorization: Bearer <key>'");
        }
      }
    }
    ENGRAM_CHECK(!f->require_key || so.api_key, engram::Code::kConfig,
                 "--require-key needs [api] api_key_env in the config, naming the variable that "
                 "holds the key");
    // SIGTERM/SIGINT are taken by sigwait below: block them before any thread starts so that
    // every thread inherits the mask and none is interrupted.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    so.max_batch = 1;  // until the session says how many it batches
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
    server.SetSession(std::move(session));
    int sig = 0;
    sigwait(&sigs, &sig);
    rep.Log(engram::base::LogLevel::kInfo, std::string("[serve] ") +
                                               (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                                               ": finishing in-flight requests, then exiting");
    server.Shutdown();
    rep.Log(engram::base::LogLevel::kInfo, "[serve] stopped");
  });
}

}  // namespace engramctl

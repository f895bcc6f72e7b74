// `engramctl run`: flags -> model::RunOptions -> the model plugin (libtorch is loaded only here).
#include <CLI/CLI.hpp>
#include <iostream>
#include <iterator>

#include "cli_common.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/module_status.h"
#include "engram/base/units.h"
#include "engram/config/config.h"
#include "engram/model/run.h"
#include "engram/serve/client.h"

namespace engramctl {

namespace {
// An integer flag's lower bound, with the message a user needs (CLI11's Range prints its type).
CLI::Validator AtLeast(int lo, std::string what) {
  return CLI::Validator(
      [lo, what](std::string& v) -> std::string {
        int x = 0;
        return CLI::detail::lexical_cast(v, x) && x >= lo ? "" : "must be " + what;
      },
      "", "");
}

// `run --remote`: each prompt as one chat request; the reply on stdout as run prints it, the
// server's hit rates (when it is engramctl) on stderr.
void RunRemote(const engram::model::RunOptions& o, const std::string& url_flag,
               StderrReporter& rep) {
  engram::config::Config cfg = o.config_path.empty() ? engram::config::Parse("", "(defaults)")
                                                     : engram::config::Load(o.config_path);
  engram::serve::RemoteOptions ro;
  ro.base_url = url_flag.empty() ? cfg.api.base_url : url_flag;
  ENGRAM_CHECK(!ro.base_url.empty(), engram::Code::kInvalidArgument,
               "--remote needs a URL: give --remote http://HOST:PORT or set [api] base_url in "
               "the config");
  ro.timeout_s = cfg.api.timeout;
  if (!cfg.api.api_key_env.empty()) {
    ro.key_origin = "$" + cfg.api.api_key_env + " (named by " + cfg.Where("api.api_key_env") + ")";
    ro.api_key = engram::config::ResolveApiKey(cfg,
                                               "or drop api_key_env for a server without a "
                                               "key; nothing was sent");
  } else {
    ro.key_origin = "[api] api_key_env is not set in the config";
  }
  ENGRAM_CHECK(o.n_predict >= 0, engram::Code::kInvalidArgument,
               "-n -1 (until end of text) is for local runs; give --remote a token count, e.g. "
               "-n 256");
  for (const auto& p : o.prompts) {
    ro.prompt = p;
    ro.max_tokens = o.n_predict;
    ro.temperature = o.temperature;
    ro.top_k = o.top_k;
    ro.top_p = o.top_p;
    ro.seed = o.seed;
    engram::serve::RemoteReply r = engram::serve::RemoteChat(ro);
    PrintStdout(p + r.text + "\n");
    if (r.has_engram) {
      auto rate = [](uint64_t h, uint64_t l) { return l ? double(h) / double(l) : 0.0; };
      char line[256];
      std::snprintf(line, sizeof line,
                    "[engram] remote: engram_hit_rate: %.2f (prompt %.2f, generated %.2f; %llu "
                    "hits / %llu lookups), engram lookup miss: %llu (table generation %llu)",
                    rate(r.hits, r.lookups), rate(r.prompt_hits, r.prompt_lookups),
                    rate(r.gen_hits, r.gen_lookups), (unsigned long long)r.hits,
                    (unsigned long long)r.lookups, (unsigned long long)(r.lookups - r.hits),
                    (unsigned long long)r.table_generation);
      rep.Log(engram::base::LogLevel::kInfo, line);
    }
  }
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  struct Flags {
    engram::model::RunOptions o;
    std::string prompt, file;
    bool json = false;
    std::string remote;
    CLI::Option* remote_opt = nullptr;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* s = app.add_subcommand(
      "run", "Run the local MoE+Engram model on a prompt, reading Engram rows from the host table");
  s->add_option("prompt", f->prompt, "Prompt text (or -p TEXT, -f FILE, or stdin)");
  s->add_option("-p,--prompt", f->prompt, "Prompt text (llama.cpp's flag)");
  s->add_option("-f,--file", f->file,
                "Read prompts from FILE, one per line (batched up to [inference] max_batch_size)");
  AddModelFlags(s, &f->o);
  s->add_option("-n,--n-predict", f->o.n_predict,
                "Tokens to generate; -1 = until end of text or the context limit")
      ->capture_default_str()
      ->check(AtLeast(-1, "-1 (until end of text) or more"));
  s->add_option("--repeat-penalty", f->o.repeat_penalty,
                "Penalise tokens among the last --repeat-last-n (llama.cpp's: a positive logit is "
                "divided by it, a negative one multiplied; 1 = off)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            double x = 0;
            return CLI::detail::lexical_cast(v, x) && x > 0 ? "" : "must be above 0 (1 = off)";
          },
          "", ""));
  s->add_option("--repeat-last-n", f->o.repeat_last_n,
                "Recent tokens (prompt included) the repeat penalty covers; -1 = all, 0 = off")
      ->capture_default_str()
      ->check(AtLeast(-1, "-1 (all), 0 (off) or more"));
  s->add_option("--temp", f->o.temperature,
                "Sampling temperature (0, or anything below 0.001, = greedy)")
      ->capture_default_str();
  s->add_option("--top-k", f->o.top_k, "Top-k sampling (0 = off)")->capture_default_str();
  s->add_option("--top-p", f->o.top_p, "Top-p (nucleus) sampling (1 = off)")->capture_default_str();
  s->add_option("-s,--seed", f->o.seed, "Sampling seed: the same seed gives the same output")
      ->capture_default_str();
  s->add_flag("--no-engram", f->o.no_engram, "Ablation: run without any Engram branch");
  s->add_flag("--perplexity", f->o.perplexity,
              "Score the prompts (teacher forcing) and print perplexity instead");
  s->add_flag("--json", f->json, "Print results as JSON on stdout");
  s->add_option("--dump-logits", f->o.dump_logits_path,
                "Write every step's logits to FILE as raw little-endian f32, prompt by prompt "
                "(parity tests)");
  f->remote_opt =
      s->add_option("--remote", f->remote,
                    "Send the prompt(s) as chat requests to an OpenAI-compatible server (default "
                    "URL: [api] base_url; key from the variable [api] api_key_env names)")
          ->expected(0, 1);
  s->callback([f] {
    StderrReporter rep;
    auto& o = f->o;
    // "--remote PROMPT": the optional URL took the prompt; a URL always has a scheme.
    if (f->remote_opt->count() > 0 && !f->remote.empty() &&
        f->remote.find("://") == std::string::npos && f->prompt.empty()) {
      f->prompt = f->remote;
      f->remote.clear();
    }
    if (!f->prompt.empty()) o.prompts.push_back(f->prompt);
    std::string text;
    if (!f->file.empty()) {
      engram::base::SpooledInput in(f->file, 1ull << 32);  // -f <(cmd) works too
      text = engram::base::ReadFileToString(in.path(), 1ull << 32);
    } else if (f->prompt.empty())
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    for (size_t p = 0, q; p < text.size(); p = q + 1) {
      q = text.find('\n', p);
      if (q == std::string::npos) q = text.size();
      std::string line = text.substr(p, q - p);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) o.prompts.push_back(line);
    }
    ENGRAM_CHECK(!o.prompts.empty(), engram::Code::kInvalidArgument,
                 "no prompt: give one, -f FILE, or text on stdin");
    if (f->remote_opt->count() > 0) {
      RunRemote(o, f->remote, rep);
      return;
    }
    o.dump_logits = !o.dump_logits_path.empty();
    o.show_config_notes = Globals().verbose;
    engram::model::RunResult r;
    engram::base::CallModule(engram::model::LoadModelPlugin(), &o, &rep, &r);
    using engram::base::FormatBytes;
    if (o.dump_logits) {
      engram::base::TempFile tf(o.dump_logits_path);
      uint64_t off = 0;
      for (const auto& p : r.prompts)
        for (const auto& v : p.logits) {
          engram::base::PwriteFull(tf.fd(), v.data(), v.size() * 4, off, tf.temp_path());
          off += v.size() * 4;
        }
      tf.Commit();
    }
    if (f->json) {
      std::string j = "{\"prompts\":[";
      for (size_t i = 0; i < r.prompts.size(); ++i) {
        const auto& p = r.prompts[i];
        auto ids = [](const std::vector<uint32_t>& v) {
          std::string s = "[";
          for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
          return s + "]";
        };
        char rate[32];
        std::snprintf(rate, sizeof rate, "%.6f",
                      p.engram_lookups ? double(p.engram_hits) / double(p.engram_lookups) : 0.0);
        j += (i ? "," : "") + std::string("{\"prompt\":") + engram::base::JsonString(p.prompt) +
             ",\"text\":" + engram::base::JsonString(p.text) +
             ",\"prompt_ids\":" + ids(p.prompt_ids) + ",\"output_ids\":" + ids(p.output_ids) +
             ",\"engram_lookups\":" + std::to_string(p.engram_lookups) +
             ",\"engram_hits\":" + std::to_string(p.engram_hits) + ",\"engram_hit_rate\":" + rate +
             ",\"bypass\":" + (p.bypass ? "true" : "false");
        if (o.perplexity) {
          char nll[64];
          std::snprintf(nll, sizeof nll, "%.6f", p.nll);
          j += ",\"nll\":" + std::string(nll) +
               ",\"scored_tokens\":" + std::to_string(p.scored_tokens);
        }
        if (o.dump_logits) j += ",\"logit_steps\":" + std::to_string(p.logits.size());
        j += "}";
      }
      char t[256];
      std::snprintf(t, sizeof t,
                    "],\"load_seconds\":%.6f,\"prompt_seconds\":%.6f,\"eval_seconds\":%.6f,\"total_"
                    "seconds\":%.6f,"
                    "\"prompt_tokens\":%llu,\"eval_tokens\":%llu}",
                    r.load_seconds, r.prompt_seconds, r.eval_seconds, r.total_seconds,
                    (unsigned long long)r.prompt_tokens, (unsigned long long)r.eval_tokens);
      PrintStdout(j + t);
    } else if (o.perplexity) {
      double nll = 0;
      uint64_t n = 0;
      for (const auto& p : r.prompts) {
        nll += p.nll;
        n += p.scored_tokens;
      }
      char b[160];
      std::snprintf(b, sizeof b, "perplexity: %.3f over %llu tokens in %zu documents (engram %s)",
                    n ? std::exp(nll / n) : 0.0, (unsigned long long)n, r.prompts.size(),
                    o.no_engram ? "off" : "on");
      PrintStdout(b);
    } else {
      for (const auto& p : r.prompts) PrintStdout(p.prompt + p.text + "\n");
    }
    auto ms = [](double s) { return s * 1000.0; };
    char line[256];
    std::snprintf(line, sizeof line, "timings:        load time = %10.2f ms", ms(r.load_seconds));
    rep.Log(engram::base::LogLevel::kInfo, line);
    std::snprintf(line, sizeof line,
                  "timings: prompt eval time = %10.2f ms / %5llu tokens (%8.2f ms per token, %8.2f "
                  "tokens per second)",
                  ms(r.prompt_seconds), (unsigned long long)r.prompt_tokens,
                  r.prompt_tokens ? ms(r.prompt_seconds) / r.prompt_tokens : 0.0,
                  r.prompt_seconds > 0 ? r.prompt_tokens / r.prompt_seconds : 0.0);
    rep.Log(engram::base::LogLevel::kInfo, line);
    std::snprintf(line, sizeof line,
                  "timings:        eval time = %10.2f ms / %5llu runs   (%8.2f ms per token, %8.2f "
                  "tokens per second)",
                  ms(r.eval_seconds), (unsigned long long)r.eval_tokens,
                  r.eval_tokens ? ms(r.eval_seconds) / r.eval_tokens : 0.0,
                  r.eval_seconds > 0 ? r.eval_tokens / r.eval_seconds : 0.0);
    rep.Log(engram::base::LogLevel::kInfo, line);
    std::snprintf(line, sizeof line, "timings:       total time = %10.2f ms / %5llu tokens",
                  ms(r.total_seconds), (unsigned long long)(r.prompt_tokens + r.eval_tokens));
    rep.Log(engram::base::LogLevel::kInfo, line);
    rep.Log(engram::base::LogLevel::kInfo,
            "memory: host table mapped " + FormatBytes(r.table_mapped_bytes) + ", resident " +
                FormatBytes(r.table_resident_bytes) + "; device " + FormatBytes(r.device_bytes) +
                "; Engram staging per step " + FormatBytes(r.staging_bytes));
  });
}

}  // namespace engramctl

// A persistent model session for `engramctl serve`: the model and table are loaded once, then
// many requests are generated in batches, token by token, with per-request sampling, stop
// strings, cancellation and live table updates. Torch-free like run.h: the implementation lives
// in libengram_model.so and is reached through LoadSessionPlugin().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/model/run.h"

namespace engram::model {

// What a session reports about itself after loading.
struct SessionInfo {
  std::string model_name;  // [model] name, else the model directory's base name
  std::string model_dir;
  std::string table_path;  // "" when Engram is off
  bool engram = false;
  bool deterministic_addressing = true;
  uint32_t ngram_order = 0;
  int max_batch = 1;  // requests generated together in one batch
  int max_seq = 0;    // prompt + generated tokens per request
  int eos_token_id = -1;
  double load_seconds = 0;
  // The explanation for a low engram_hit_rate over `lookups` (against what the table scores on
  // its own build corpus), "" when the rate is not low; empty when Engram is off.
  std::function<std::string(double rate, uint64_t lookups)> low_hit_rate_note;
};

// The table state that served a batch (a new state each time an append commits or a fold
// replaces the file).
struct TableState {
  uint64_t generation = 0;       // 1 for the state loaded at start, +1 per reload
  uint64_t journal_commits = 0;  // committed append transactions in that state
  uint64_t journal_entries = 0;  // committed journal entries overlaid on the base
  uint64_t file_bytes = 0;
  bool stale = false;  // deterministic addressing met an unfolded journal: an older state serves
};

// Temperatures below this are greedy, as 0 is: logits / 1e-39 overflow to inf and sampling would
// run on NaN. run, serve's HTTP side (schemas/http_api.md) and the sampler share it.
inline constexpr double kMinTemperature = 1e-3;

struct GenerateRequest {
  std::string prompt;  // raw text (chat requests are templated by the caller)
  int max_tokens = 16;
  double temperature = 0.8;  // 0 (or below kMinTemperature) = greedy
  int top_k = 0;             // 0 = off
  double top_p = 1.0;        // 1 = off
  uint64_t seed = 0;
  std::vector<std::string> stop;  // generation ends before the first occurrence of any
  // Called from the generating thread with each new piece of text that is final (never a part of
  // a stop string nor an incomplete UTF-8 sequence). Returning false cancels the request (client
  // gone): it finishes with finish_reason "cancelled" and frees its batch slot's work.
  std::function<bool(std::string_view piece)> on_text;
};

struct GenerateResult {
  std::string text;
  std::string finish_reason;  // "stop" | "length" | "cancelled" | "error"
  std::string error;          // with finish_reason "error": subject, values, fix
  int error_code = 0;         // engram::Code of the error
  uint64_t prompt_tokens = 0, completion_tokens = 0;
  uint64_t prompt_lookups = 0, prompt_hits = 0;  // Engram lookups over the prompt's positions
  uint64_t gen_lookups = 0, gen_hits = 0;        // ... over the generated tokens' positions
  bool bypass = false;                           // the prompt is shorter than the n-gram order
  TableState table;
  double prompt_seconds = 0, eval_seconds = 0;  // of the batch that served it
  int batch_size = 1;                           // requests in that batch
};

// One loaded model + table. Not thread-safe: one GenerateBatch at a time (serve's scheduler
// thread); info() and table_state() may be read from any thread after Open returns.
class Session {
 public:
  virtual ~Session() = default;
  virtual const SessionInfo& info() const noexcept = 0;
  // Generates every request (at most info().max_batch) as one batch. Before the batch, picks up
  // a committed append or a replaced file; all requests of the batch see that one state.
  // Never throws: a failing request gets finish_reason "error"; a failure of the whole batch
  // marks every request so.
  virtual void GenerateBatch(const std::vector<GenerateRequest*>& requests,
                             std::vector<GenerateResult>* results) noexcept = 0;
  virtual TableState table_state() const noexcept = 0;
};

// The plugin's session entry point. Of RunOptions it reads config_path, model_dir, table_path,
// threads, device, dtype, kv_cache_dtype and max_batch (prompts and sampling come per request).
// Logs the same [engram] load lines as run. On success *out owns the session (delete it).
// Returns a status (base/module_status.h): call it through base::CallModule.
using OpenSessionFn = int (*)(const RunOptions* opts, base::Reporter* reporter, Session** out,
                              std::string* error);
inline constexpr const char* kSessionSymbol = "engram_model_session_v3";

// Loads libengram_model.so as LoadModelPlugin does and returns its session entry point.
OpenSessionFn LoadSessionPlugin();

}  // namespace engram::model

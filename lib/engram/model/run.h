// `engramctl run`: a local MoE+Engram model answers prompts, reading Engram rows from the host
// table. This header is torch-free: libtorch lives only in libengram_model.so, which `run` loads
// on demand (LoadModelPlugin), so no other subcommand pays libtorch's start-up cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/reporter.h"

namespace engram::model {

struct RunOptions {
  std::string config_path;  // config.toml ("" = defaults + flags)
  std::string model_dir;    // overrides [model] path
  std::string table_path;   // overrides [engram.table] path (and ENGRAM_TABLE_PATH)
  // Keep in-place folds out for the whole run (one request). serve's session takes the fold lock
  // per batch instead.
  bool hold_table_lock = true;
  std::vector<std::string> prompts;  // one request each (batched up to max_batch_size)
  int n_predict = 64;                // tokens to generate per prompt; -1 = until end of text
                                     // or the context limit (llama.cpp's convention)
  double repeat_penalty = 1.0;       // llama.cpp's: logits of the last repeat_last_n tokens are
                                     // divided (if > 0) or multiplied (if < 0) by it; 1 = off
  int repeat_last_n = 64;            // how many recent tokens (prompt included) it covers
  double temperature = 0.8;          // 0 = greedy
  int top_k = 40;                    // 0 = off
  double top_p = 0.95;               // 1 = off
  uint64_t seed = 0;                 // sampling seed (same seed -> same output)
  int threads = 0;                   // 0 = all cores
  std::string device;                // "" = [model] device; "cpu" | "cuda:N"
  bool no_engram = false;            // ablation: skip every Engram branch
  bool perplexity = false;           // score each prompt (teacher forcing) instead of generating
  std::string dtype;                 // "" = [model] dtype; float32 | bfloat16
  std::string kv_cache_dtype;        // "" = [inference] kv_cache_dtype
  bool dump_logits = false;          // keep every step's logits (parity tests)
  std::string dump_logits_path;  // write them there as raw little-endian f32 (prompt, step, vocab)
  int max_batch = 0;             // 0 = [inference] max_batch_size
  bool show_config_notes = false;  // print notes on config keys engramctl does not use (-v)
  bool read_journal = false;       // read the table through its journal whatever [engram]
                                   // deterministic_addressing says (append --fit)
  // Perplexity mode: also score every document with this table (same layout, e.g. the table in
  // another dtype) and compare the two next-token distributions position by position
  // (RunResult::compare): `quantize --check-corpus`, `verify --reference`.
  std::string compare_table_path;
  // serve: after each request, append its canonical ids (prompt then generated tokens: every
  // position the model read rows for) to this file as u32 little-endian, then 0xFFFFFFFF; the
  // input of `hotset --tokens` and `prefetch --hot`.
  std::string trace_path;
};

struct PromptResult {
  std::string prompt;
  std::string text;  // generated continuation (decoded)
  std::vector<uint32_t> prompt_ids, output_ids;
  uint64_t engram_lookups = 0, engram_hits = 0;
  bool bypass = false;
  double nll = 0;          // perplexity mode: summed negative log-likelihood
  double compare_nll = 0;  // with compare_table_path: the same with the other table
  uint64_t scored_tokens = 0;
  std::vector<std::vector<float>> logits;  // with dump_logits: one vector per forward position
};

// The table against compare_table_path, over every scored position of every document.
struct CompareResult {
  std::vector<float> kl;            // KL(P_table || P_compare) in nats, one per scored position
  uint64_t top1_agree = 0;          // positions whose most likely next token is the same
  uint64_t tokens = 0;              // scored positions
  double nll = 0, compare_nll = 0;  // summed over them
};

struct RunResult {
  std::vector<PromptResult> prompts;
  CompareResult compare;  // with compare_table_path
  double load_seconds = 0, table_seconds = 0, prompt_seconds = 0, eval_seconds = 0,
         total_seconds = 0;
  uint64_t prompt_tokens = 0, eval_tokens = 0;
  uint64_t table_mapped_bytes = 0, table_resident_bytes = 0, device_bytes = 0, staging_bytes = 0;
};

// The plugin's entry point (C linkage so dlsym finds it; one version per ABI). Returns a status
// (base/module_status.h): call it through base::CallModule.
using RunFn = int (*)(const RunOptions* opts, base::Reporter* reporter, RunResult* result,
                      std::string* error);
inline constexpr const char* kRunSymbol = "engram_model_run_v3";

// Loads libengram_model.so (ENGRAM_MODEL_PLUGIN, then next to the executable, then the library
// path) and returns its entry point. Throws kInvalidArgument when the build has no model module.
RunFn LoadModelPlugin();

// Every problem run would refuse the config in opts->config_path for, without loading weights
// (device, model directory, [moe] against config.json, tokenizer, the table's layout against the
// model); verify --config lists them. Returns a status (base/module_status.h).
using SetupProblemsFn = int (*)(const RunOptions* opts, std::vector<std::string>* problems,
                                std::string* error);
inline constexpr const char* kSetupProblemsSymbol = "engram_model_setup_problems_v1";
SetupProblemsFn LoadSetupProblemsPlugin();

}  // namespace engram::model

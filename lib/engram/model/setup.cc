// The checks run, serve and append --fit share before any token is computed: config, device,
// model directory, tokenizer, host memory, the table against the model, and the [engram] load
// lines of the deployment notes.
#include "engram/model/setup.h"

#include <fcntl.h>

#include <cstdio>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/module_status.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/format/reader.h"
#include "engram/hash/addressing.h"
#include "engram/model/transformer.h"
#include "engram/table/prefetch.h"
#include "engram/table/verify.h"
#include "engram/tokenizer/canonical.h"

namespace engram::model {

namespace {

using base::LogLevel;

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

void CheckTableAgainstModel(const format::Layout& l, const ModelConfig& mc, uint64_t tok_fp,
                            const std::string& path) {
  std::vector<std::string> p;
  auto add = [&](const std::string& s) { p.push_back(s); };
  if (l.spec.max_order != mc.max_ngram_size)
    add("n-gram order: table " + std::to_string(l.spec.max_order) + ", model " +
        std::to_string(mc.max_ngram_size));
  if (l.spec.n_heads != mc.n_head_per_ngram)
    add("heads per order: table " + std::to_string(l.spec.n_heads) + ", model " +
        std::to_string(mc.n_head_per_ngram));
  if (l.row_dim != mc.row_dim())
    add("row width: table " + std::to_string(l.row_dim) + ", model " +
        std::to_string(mc.row_dim()));
  if (std::string(hash::AddressingName(l.spec.mode)) != mc.addressing)
    add(std::string("addressing: table ") + std::string(hash::AddressingName(l.spec.mode)) +
        ", model " + mc.addressing);
  // More buckets than the model's is a table built with --tile-values: each n-gram reads a copy
  // of the row it read in the model's table.
  if (l.spec.mode == hash::AddressingMode::kNative && mc.log2_buckets &&
      l.spec.log2_buckets < mc.log2_buckets)
    add("buckets: table 2^" + std::to_string(l.spec.log2_buckets) + ", model 2^" +
        std::to_string(mc.log2_buckets) +
        " (a table may have more buckets per sub-table than the model, built with --tile-values, "
        "not fewer)");
  for (uint32_t id : mc.engram_layer_ids) {
    bool found = false;
    for (uint32_t t : l.spec.layer_ids) found = found || t == id;
    if (!found)
      add("layer " + std::to_string(id) +
          " has an Engram branch in the model but no rows in the table");
  }
  if (l.tokenizer_fingerprint && tok_fp && l.tokenizer_fingerprint != tok_fp)
    add("tokenizer fingerprint: table " + Hex(l.tokenizer_fingerprint) +
        ", model's tokenizer.json " + Hex(tok_fp));
  if (p.empty()) return;
  std::string msg = path + " does not fit the model:";
  for (const auto& s : p) msg += "\n  " + s;
  msg +=
      "\nrebuild the table for this model (engramctl build with the model's layout and tokenizer)";
  ENGRAM_THROW(Code::kInvalidArgument, msg);
}

namespace {

// The device of o or the config: "cpu", else throws (run computes on the CPU only).
void CheckDevice(const RunOptions& o, const config::Config& cfg) {
  std::string device = o.device.empty() ? cfg.model.device : o.device;
  if (device.rfind("cuda", 0) == 0) {
    ENGRAM_CHECK(TorchHasCuda(), Code::kInvalidArgument,
                 "device \"" << device << "\" ("
                             << (o.device.empty() ? cfg.Where("model.device") : "--device")
                             << ") needs CUDA, but this engramctl's libtorch has no CUDA device or "
                                "support; run on CPU "
                                "with --device cpu (or set [model] device = \"cpu\"), or build "
                                "against a CUDA-enabled "
                                "libtorch (see README, CUDA)");
    // The runner places every tensor on the CPU; a GPU forward pass (rows gathered by kernels/
    // on a side stream) is not wired in yet, and running on CPU while saying cuda would mislead.
    ENGRAM_THROW(
        Code::kInvalidArgument,
        "device \"" << device << "\": this engramctl's run computes on the CPU only (the CUDA "
                    << "kernels in kernels/ are not yet wired into run); use --device cpu");
  }
  ENGRAM_CHECK(device == "cpu", Code::kInvalidArgument,
               "device \"" << device << "\": use cpu or cuda:N");
}

std::string ModelDir(const RunOptions& o, const config::Config& cfg) {
  std::string model_dir = o.model_dir.empty() ? cfg.model.path : o.model_dir;
  ENGRAM_CHECK(!model_dir.empty(), Code::kInvalidArgument,
               "no model: give --model DIR or set [model] path in the config");
  return model_dir;
}

// The model directory's config.json and weights file; throws when either is missing.
ModelConfig LoadModelDir(const std::string& model_dir) {
  ModelConfig mc = LoadModelConfig(model_dir);
  ENGRAM_CHECK(base::PathExists(model_dir + "/model.safetensors") ||
                   base::PathExists(model_dir + "/model.safetensors.index.json"),
               Code::kInvalidArgument,
               model_dir << " has no model.safetensors (or model.safetensors.index.json); the "
                            "model directory is incomplete");
  return mc;
}

// Every way [moe] disagrees with the model's config.json.
std::vector<std::string> MoeProblems(const config::Config& cfg, const ModelConfig& mc) {
  std::vector<std::string> p;
  if (cfg.moe.num_experts && *cfg.moe.num_experts != mc.n_routed_experts)
    p.push_back(cfg.Where("moe.num_experts") + " = " + std::to_string(*cfg.moe.num_experts) +
                " but " + mc.dir + "/config.json has n_routed_experts = " +
                std::to_string(mc.n_routed_experts) + "; fix the config to match the model");
  if (cfg.moe.top_k && *cfg.moe.top_k != mc.num_experts_per_tok)
    p.push_back(cfg.Where("moe.top_k") + " = " + std::to_string(*cfg.moe.top_k) + " but " + mc.dir +
                "/config.json has num_experts_per_tok = " + std::to_string(mc.num_experts_per_tok) +
                "; fix the config to match the model");
  return p;
}

// The tokenizer the config names (or the model directory's), checked against the model.
std::unique_ptr<tokenizer::Tokenizer> LoadModelTokenizer(const config::Config& cfg,
                                                         const std::string& model_dir,
                                                         const ModelConfig& mc) {
  std::string tok_path =
      cfg.model.tokenizer.empty() ? model_dir + "/tokenizer.json" : cfg.model.tokenizer;
  ENGRAM_CHECK(base::PathExists(tok_path), Code::kInvalidArgument,
               tok_path << " is missing: the model directory needs its tokenizer.json (or set "
                           "[model] tokenizer)");
  auto tok = tokenizer::Tokenizer::Load(tok_path);
  const uint64_t tok_fp = tok->Fingerprint();
  if (!mc.tokenizer_fingerprint.empty() && mc.tokenizer_fingerprint != Hex(tok_fp))
    ENGRAM_THROW(Code::kInvalidArgument, tok_path << " (fingerprint " << Hex(tok_fp)
                                                  << ") is not the tokenizer the model was "
                                                  << "trained with (" << mc.tokenizer_fingerprint
                                                  << ")");
  return tok;
}

}  // namespace

std::vector<std::string> SetupProblems(const RunOptions& o) {
  std::vector<std::string> p;
  auto attempt = [&](auto&& check) {
    try {
      check();
      return true;
    } catch (const Error& e) {
      p.push_back(e.what());
      return false;
    }
  };
  config::Config cfg;
  if (!attempt([&] { cfg = config::Load(o.config_path); })) return p;
  attempt([&] { CheckDevice(o, cfg); });
  std::string model_dir;
  if (!attempt([&] { model_dir = ModelDir(o, cfg); })) return p;
  ModelConfig mc;
  if (!attempt([&] { mc = LoadModelDir(model_dir); })) return p;
  for (auto& m : MoeProblems(cfg, mc)) p.push_back(std::move(m));
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!attempt([&] { tok = LoadModelTokenizer(cfg, model_dir, mc); })) return p;
  const std::string path = o.table_path.empty() ? cfg.table.path : o.table_path;
  if (cfg.engram.enable && !mc.engram_layer_ids.empty() && !path.empty())
    attempt([&] {
      // The layout only: a table that does not open is verify's own problem to report.
      std::unique_ptr<format::Reader> reader;
      try {
        reader = format::Reader::Open(path);
      } catch (const Error&) {
        return;
      }
      CheckTableAgainstModel(reader->layout(), mc, tok->Fingerprint(), path);
    });
  return p;
}

void LoadSetup(const RunOptions& o, base::Reporter& rep, Setup& s, RunResult& res) {
  s.cfg = o.config_path.empty() ? config::Parse("", "(defaults)") : config::Load(o.config_path);
  for (const auto& n : s.cfg.notes)
    if (o.show_config_notes)
      rep.Log(LogLevel::kNote,
              s.cfg.source_path + ":" + std::to_string(n.line) + ": " + n.key + ": " + n.text);
  CheckDevice(o, s.cfg);
  const std::string model_dir = ModelDir(o, s.cfg);
  s.mc = LoadModelDir(model_dir);
  if (auto moe = MoeProblems(s.cfg, s.mc); !moe.empty()) ENGRAM_THROW(Code::kConfig, moe.front());
  s.tok = LoadModelTokenizer(s.cfg, model_dir, s.mc);
  const uint64_t tok_fp = s.tok->Fingerprint();

  s.engram = s.cfg.engram.enable && !o.no_engram && !s.mc.engram_layer_ids.empty();
  base::Stopwatch table_sw;
  if (s.engram) {
    std::string path = o.table_path.empty() ? s.cfg.table.path : o.table_path;
    ENGRAM_CHECK(!path.empty(), Code::kInvalidArgument,
                 "no Engram table: set [engram.table] path (or ENGRAM_TABLE_PATH, or --table), or "
                 "run with --no-engram");
    rep.Log(LogLevel::kInfo, "[engram] loading ngram table from " + path);
    uint64_t bytes;
    {
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      bytes = base::RegularFileSize(fd.get(), path);
    }
    const double limit = s.cfg.engram.host_memory_limit_gb * 1e9;
    if (limit > 0 && static_cast<double>(bytes) > limit)
      ENGRAM_THROW(
          Code::kConfig, "the table "
                             << path << " is " << base::FormatGB(static_cast<double>(bytes))
                             << ", larger than " << s.cfg.Where("engram.host_memory_limit_gb")
                             << " = " << base::FormatGB(limit)
                             << "; raise the limit or use a smaller table (it is never loaded into "
                                "device memory instead)");
    uint64_t need = table::HostMemoryNeeded(bytes, 1.15), avail = base::AvailableMemoryBytes();
    if (avail && need > avail)
      ENGRAM_THROW(
          Code::kIo,
          "the table " << path << " (" << base::FormatGB(static_cast<double>(bytes))
                       << ") needs about " << base::FormatGB(static_cast<double>(need))
                       << " of free host memory with page-cache overhead, but only "
                       << base::FormatGB(static_cast<double>(avail))
                       << " is available; free memory or run on a larger host (the table is never "
                          "loaded into device memory instead)");
    format::ViewOptions vo;
    vo.deterministic_addressing = s.cfg.engram.deterministic_addressing && !o.read_journal;
    vo.open.use_mmap = s.cfg.table.mmap;
    vo.open.lock = o.hold_table_lock ? format::ReadLock::kHold : format::ReadLock::kOpen;
    s.view = format::TableView::Open(path, vo);
    const format::Layout& l = s.view->layout();
    CheckTableAgainstModel(l, s.mc, tok_fp, path);
    for (uint32_t id : s.mc.engram_layer_ids)
      for (size_t k = 0; k < l.spec.layer_ids.size(); ++k)
        if (l.spec.layer_ids[k] == id) s.table_layer.push_back(k);
    s.canon = l.canon_map;
    if (s.canon.empty()) s.canon = tokenizer::BuildCanonicalMap(*s.tok).map;
    if (s.cfg.table.prefetch && s.cfg.table.mmap) {
      table::WarmResult w = table::Warm(path, o.threads, rep);
      rep.Log(LogLevel::kInfo, "[engram] prefetch: " + base::FormatBytes(w.resident) + " of " +
                                   base::FormatBytes(w.bytes) + " resident (read " +
                                   base::FormatBytes(w.read_bytes) + " in " +
                                   base::FormatSeconds(w.seconds) + ")");
    }
    res.table_mapped_bytes = bytes;
    // What this process holds for the table (the whole file, mapped or read), against the
    // configured limit: the notes' line repeated the limit, 48.0 GB on a 23 GB machine.
    rep.Log(LogLevel::kInfo,
            std::string("[engram] ") +
                (s.cfg.table.mmap ? "mmap enabled" : "mmap disabled (table read into memory)") +
                ", host memory reserved: " + base::FormatGB(static_cast<double>(bytes)) +
                (limit > 0 ? " " + std::string(s.cfg.table.mmap ? "mapped" : "read") + ", limit " +
                                 base::FormatGB(limit)
                           : ""));
    rep.Log(LogLevel::kInfo, "[engram] hash buckets: " +
                                 std::to_string(l.spec.mode == hash::AddressingMode::kNative
                                                    ? l.spec.sizes[0]
                                                    : l.spec.base_sizes[0]) +
                                 ", order: " + std::to_string(l.spec.max_order) +
                                 ", embed_dim: " + std::to_string(l.row_dim * l.spec.n_heads));
    rep.Log(LogLevel::kInfo, std::string("[engram] deterministic addressing: ") +
                                 (s.cfg.engram.deterministic_addressing && !o.read_journal
                                      ? "ON"
                                      : "OFF (reading through the journal)"));
  } else {
    rep.Log(LogLevel::kInfo,
            o.no_engram
                ? "[engram] disabled by --no-engram (ablation)"
                : "[engram] disabled ([engram] enable = false or the model has no Engram layers)");
  }
  res.table_seconds = table_sw.Seconds();
}

std::string TableLoadedLine(double seconds, uint64_t device_bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1fs", seconds);
  return "[engram] table loaded in " + std::string(b) +
         ", gpu footprint: " + base::FormatGB(static_cast<double>(device_bytes));
}

}  // namespace engram::model

extern "C" int engram_model_setup_problems_v1(const engram::model::RunOptions* opts,
                                              std::vector<std::string>* problems,
                                              std::string* error) {
  return engram::base::CatchAsStatus("the model module", error,
                                     [&] { *problems = engram::model::SetupProblems(*opts); });
}

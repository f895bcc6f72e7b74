// `run`: configuration and consistency checks, the [engram] load lines, batched generation with
// Engram rows gathered from the host table ahead of the layers that use them, timings.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/resource.h"
#include "engram/base/units.h"
#include "engram/config/config.h"
#include "engram/format/view.h"
#include "engram/hash/addressing.h"
#include "engram/hash/ngram_hash.h"
#include "engram/model/model_config.h"
#include "engram/model/run.h"
#include "engram/model/session.h"
#include "engram/model/setup.h"
#include "engram/model/transformer.h"
#include "engram/table/gather.h"
#include "engram/table/lookup.h"
#include "engram/table/prefetch.h"
#include "engram/table/verify.h"
#include "engram/tokenizer/canonical.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::model {

namespace {

using base::LogLevel;

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Engram rows of one step for every Engram layer, gathered on a side thread in layer order so
// that layer k's rows are ready when the forward pass reaches it.
class Gatherer {
 public:
  Gatherer(const format::TableView& view, const ModelConfig& mc, std::vector<size_t> table_layer)
      : view_(view), mc_(mc), table_layer_(std::move(table_layer)) {}

  // seqs[b] = that sequence's canonical ids so far including this step's T new ones (for padded
  // slots, valid[b * T + t] == 0). Computes every layer's bucket ids now (step entry), then
  // gathers rows in the background.
  void Start(const std::vector<std::vector<uint32_t>>& seqs, int T,
             const std::vector<uint8_t>& valid) {
    const format::Layout& l = view_.layout();
    const size_t B = seqs.size(), per = l.spec.per_layer(), layers = table_layer_.size();
    B_ = B;
    T_ = T;
    buckets_.assign(layers, std::vector<uint64_t>(B * T * per, 0));
    full_.assign(B * T * (l.spec.max_order - 1), 0);
    tags_.assign(B * T * (l.spec.max_order - 1), 0);
    uint32_t scratch[hash::kMaxOrder];
    std::vector<uint64_t> tmp;
    for (size_t b = 0; b < B; ++b) {
      const auto& s = seqs[b];
      int real = 0;
      for (int t = 0; t < T; ++t) real += valid[b * T + t];
      size_t ctx = std::min<size_t>(s.size() - real, l.spec.max_order - 1);
      std::span<const uint32_t> span(s.data() + s.size() - real - ctx, real + ctx);
      tmp.resize(span.size() * per);
      for (size_t k = 0; k < layers; ++k) {
        hash::ComputeBuckets(l.spec, table_layer_[k], span, tmp.data());
        for (int r = 0; r < real; ++r) {
          size_t t = T - real + r;
          std::memcpy(&buckets_[k][(b * T + t) * per], &tmp[(ctx + r) * per], per * 8);
        }
      }
      for (int r = 0; r < real; ++r) {
        size_t t = T - real + r, pos_in_seq = s.size() - real + r;
        for (uint32_t n = hash::kMinOrder; n <= l.spec.max_order; ++n) {
          size_t cell = (b * T + t) * (l.spec.max_order - 1) + (n - hash::kMinOrder);
          full_[cell] = pos_in_seq + 1 >= n;
          const uint32_t* g = hash::NgramAt(l.spec, s, pos_in_seq, n, scratch);
          tags_[cell] = hash::OwnerTag(g, n, l.owner_tag_seed);
        }
      }
    }
    valid_ = valid;
    bufs_.assign(layers, std::vector<float>(B * T * mc_.memory_dim(), 0.0f));
    ready_.assign(layers, 0);
    worker_ = std::thread([this] { Run(); });
  }

  const float* Rows(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready_[k] != 0; });
    if (error_) std::rethrow_exception(error_);
    return bufs_[k].data();
  }

  void Finish(uint64_t* lookups, uint64_t* hits, std::vector<uint64_t>* seq_lookups,
              std::vector<uint64_t>* seq_hits) {
    if (worker_.joinable()) worker_.join();
    if (error_) std::rethrow_exception(error_);
    *lookups += step_lookups_;
    *hits += step_hits_;
    for (size_t b = 0; b < B_; ++b) {
      (*seq_lookups)[b] += seq_l_[b];
      (*seq_hits)[b] += seq_h_[b];
    }
  }

  ~Gatherer() {
    if (worker_.joinable()) worker_.join();
  }

 private:
  void Run() {
    try {
      const format::Layout& l = view_.layout();
      const size_t per = l.spec.per_layer(), D = l.row_dim, heads = l.spec.n_heads;
      std::vector<uint64_t> rows(per);
      step_lookups_ = step_hits_ = 0;
      seq_l_.assign(B_, 0);
      seq_h_.assign(B_, 0);
      for (size_t k = 0; k < table_layer_.size(); ++k) {
        std::vector<float>& out = bufs_[k];
        for (size_t b = 0; b < B_; ++b)
          for (int t = 0; t < T_; ++t) {
            if (!valid_[b * T_ + t]) continue;
            for (size_t c = 0; c < per; ++c) {
              uint32_t n = static_cast<uint32_t>(c / heads) + hash::kMinOrder;
              rows[c] =
                  l.RowOf(l.spec.SubIndex(table_layer_[k], n, static_cast<uint32_t>(c % heads)),
                          buckets_[k][(b * T_ + t) * per + c]);
            }
            table::GatherRowsF32(view_, rows, &out[(b * T_ + t) * per * D]);
            for (size_t c = 0; c < per; ++c) {
              uint32_t n = static_cast<uint32_t>(c / heads) + hash::kMinOrder;
              uint64_t row = rows[c];
              size_t cell = (b * T_ + t) * (l.spec.max_order - 1) + (n - hash::kMinOrder);
              if (full_[cell]) {
                bool hit = view_.Tag(row) == tags_[cell];
                ++step_lookups_;
                step_hits_ += hit;
                ++seq_l_[b];
                seq_h_[b] += hit;
              }
            }
          }
        {
          std::lock_guard<std::mutex> lock(mu_);
          ready_[k] = 1;
        }
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      for (auto& r : ready_) r = 1;
      cv_.notify_all();
    }
  }

  const format::TableView& view_;
  const ModelConfig& mc_;
  std::vector<size_t> table_layer_;
  size_t B_ = 0;
  int T_ = 0;
  std::vector<std::vector<uint64_t>> buckets_;
  std::vector<uint8_t> full_, valid_;
  std::vector<uint32_t> tags_;
  std::vector<std::vector<float>> bufs_;
  std::vector<uint8_t> ready_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
  std::exception_ptr error_;
  uint64_t step_lookups_ = 0, step_hits_ = 0;
  std::vector<uint64_t> seq_l_, seq_h_;
};

// llama.cpp's repetition penalty: every distinct token among the last repeat_last_n of `ids`
// (-1 = all) has its logit divided by the penalty if positive, multiplied if negative.
void ApplyRepeatPenalty(const std::vector<uint32_t>& ids, const RunOptions& o,
                        std::vector<float>* logits) {
  size_t n =
      o.repeat_last_n < 0 ? ids.size() : std::min(ids.size(), static_cast<size_t>(o.repeat_last_n));
  std::vector<uint32_t> recent(ids.end() - static_cast<std::ptrdiff_t>(n), ids.end());
  std::sort(recent.begin(), recent.end());
  recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
  const auto p = static_cast<float>(o.repeat_penalty);
  for (uint32_t t : recent) {
    if (t >= logits->size()) continue;
    float& l = (*logits)[t];
    l = l > 0 ? l / p : l * p;
  }
}

uint32_t Sample(const float* logits, size_t V, const RunOptions& o, std::mt19937_64* rng) {
  if (o.temperature <= 0)
    return static_cast<uint32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<std::pair<float, uint32_t>> c(V);
  for (size_t i = 0; i < V; ++i)
    c[i] = {logits[i] / static_cast<float>(o.temperature), static_cast<uint32_t>(i)};
  size_t k = (o.top_k > 0 && static_cast<size_t>(o.top_k) < V) ? static_cast<size_t>(o.top_k) : V;
  std::partial_sort(c.begin(), c.begin() + k, c.end(),
                    [](auto& a, auto& b) { return a.first > b.first; });
  c.resize(k);
  double mx = c[0].first, sum = 0;
  std::vector<double> p(k);
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp(c[i].first - mx);
  size_t keep = k;
  if (o.top_p < 1.0) {
    double acc = 0;
    for (size_t i = 0; i < k; ++i) {
      acc += p[i] / sum;
      if (acc >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  double u = std::uniform_real_distribution<double>(0, total)(*rng);
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return c[i].second;
    u -= p[i];
  }
  return c[keep - 1].second;
}

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

}  // namespace

void LoadSetup(const RunOptions& o, base::Reporter& rep, Setup& s, RunResult& res) {
  s.cfg = o.config_path.empty() ? config::Parse("", "(defaults)") : config::Load(o.config_path);
  for (const auto& n : s.cfg.notes)
    if (o.show_config_notes)
      rep.Log(LogLevel::kNote,
              s.cfg.source_path + ":" + std::to_string(n.line) + ": " + n.key + ": " + n.text);
  std::string device = o.device.empty() ? s.cfg.model.device : o.device;
  if (device.rfind("cuda", 0) == 0) {
    ENGRAM_CHECK(TorchHasCuda(), Code::kInvalidArgument,
                 "device \"" << device << "\" ("
                             << (o.device.empty() ? s.cfg.Where("model.device") : "--device")
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
  } else {
    ENGRAM_CHECK(device == "cpu", Code::kInvalidArgument,
                 "device \"" << device << "\": use cpu or cuda:N");
  }
  std::string model_dir = o.model_dir.empty() ? s.cfg.model.path : o.model_dir;
  ENGRAM_CHECK(!model_dir.empty(), Code::kInvalidArgument,
               "no model: give --model DIR or set [model] path in the config");
  s.mc = LoadModelConfig(model_dir);
  ENGRAM_CHECK(base::PathExists(model_dir + "/model.safetensors") ||
                   base::PathExists(model_dir + "/model.safetensors.index.json"),
               Code::kInvalidArgument,
               model_dir << " has no model.safetensors (or model.safetensors.index.json); the "
                            "model directory is incomplete");
  if (s.cfg.moe.num_experts && *s.cfg.moe.num_experts != s.mc.n_routed_experts)
    ENGRAM_THROW(Code::kConfig,
                 s.cfg.Where("moe.num_experts")
                     << " = " << *s.cfg.moe.num_experts << " but " << model_dir
                     << "/config.json has n_routed_experts = " << s.mc.n_routed_experts
                     << "; fix the config to match the model");
  if (s.cfg.moe.top_k && *s.cfg.moe.top_k != s.mc.num_experts_per_tok)
    ENGRAM_THROW(Code::kConfig,
                 s.cfg.Where("moe.top_k")
                     << " = " << *s.cfg.moe.top_k << " but " << model_dir
                     << "/config.json has num_experts_per_tok = " << s.mc.num_experts_per_tok
                     << "; fix the config to match the model");
  std::string tok_path =
      s.cfg.model.tokenizer.empty() ? model_dir + "/tokenizer.json" : s.cfg.model.tokenizer;
  ENGRAM_CHECK(base::PathExists(tok_path), Code::kInvalidArgument,
               tok_path << " is missing: the model directory needs its tokenizer.json (or set "
                           "[model] tokenizer)");
  s.tok = tokenizer::Tokenizer::Load(tok_path);
  const uint64_t tok_fp = s.tok->Fingerprint();
  if (!s.mc.tokenizer_fingerprint.empty() && s.mc.tokenizer_fingerprint != Hex(tok_fp))
    ENGRAM_THROW(Code::kInvalidArgument, tok_path << " (fingerprint " << Hex(tok_fp)
                                                  << ") is not the tokenizer the model was "
                                                  << "trained with (" << s.mc.tokenizer_fingerprint
                                                  << ")");

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
    const double reserved = limit > 0 ? limit : static_cast<double>(bytes);
    rep.Log(LogLevel::kInfo,
            std::string("[engram] ") +
                (s.cfg.table.mmap ? "mmap enabled" : "mmap disabled (table read into memory)") +
                ", host memory reserved: " + base::FormatGB(reserved));
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

RunResult RunImpl(const RunOptions& o, base::Reporter& rep) {
  base::Stopwatch total;
  RunResult res;
  Setup s;
  LoadSetup(o, rep, s, res);

  TransformerOptions to;
  to.dtype = o.dtype.empty() ? s.cfg.model.dtype : o.dtype;
  if (to.dtype == "bf16") to.dtype = "bfloat16";
  if (to.dtype == "f32") to.dtype = "float32";
  to.kv_cache_dtype = o.kv_cache_dtype.empty() ? s.cfg.inference.kv_cache_dtype : o.kv_cache_dtype;
  to.threads = o.threads;
  int max_batch = o.max_batch > 0 ? o.max_batch : static_cast<int>(s.cfg.inference.max_batch_size);
  to.max_batch = std::max(1, std::min<int>(max_batch, static_cast<int>(o.prompts.size())));
  if (o.perplexity) to.max_batch = 1;  // documents are scored one at a time, in windows
  to.max_seq = static_cast<int>(std::min<uint32_t>(s.mc.max_position_embeddings, 4096));
  base::Stopwatch load_sw;
  auto model = Transformer::Load(s.mc, to);
  res.load_seconds = load_sw.Seconds() + res.table_seconds;
  if (s.engram) rep.Log(LogLevel::kInfo, TableLoadedLine(res.table_seconds, res.device_bytes));

  const uint32_t V = s.mc.vocab_size;
  const uint32_t N = s.engram ? s.view->layout().spec.max_order : 2;
  std::vector<float> logits;
  size_t low_hit_requests = 0;  // requests with a low engram_hit_rate (explained once)
  // What the table scores on its own corpus: a request far below it is explained.
  const double corpus_rate = s.engram ? table::CorpusHitRate(s.view->reader()) : -1;
  for (size_t first = 0; first < o.prompts.size(); first += to.max_batch) {
    const size_t B = std::min<size_t>(to.max_batch, o.prompts.size() - first);
    std::vector<PromptResult> pr(B);
    std::vector<std::vector<uint32_t>> ids(B), canon(B);
    size_t T = 0;
    for (size_t b = 0; b < B; ++b) {
      pr[b].prompt = o.prompts[first + b];
      ids[b] = s.tok->Encode(pr[b].prompt);
      ENGRAM_CHECK(!ids[b].empty(), Code::kInvalidArgument,
                   "prompt " << first + b + 1 << " is empty after tokenization");
      for (uint32_t id : ids[b]) {
        ENGRAM_CHECK(id < V, Code::kInvalidArgument,
                     "token id " << id << " is outside the model's vocabulary");
        canon[b].push_back(s.Canonical(id));
      }
      pr[b].prompt_ids = ids[b];
      T = std::max(T, ids[b].size());
    }
    model->Reset();
    std::vector<std::mt19937_64> rng;
    for (size_t b = 0; b < B; ++b) rng.emplace_back(o.seed + 0x9E3779B97F4A7C15ull * (first + b));
    std::vector<uint64_t> seq_lookups(B, 0), seq_hits(B, 0);
    uint64_t lookups = 0, hits = 0;
    std::vector<int64_t> pos_next(B, 0);
    // One step over the given per-sequence new tokens (left-padded to the longest).
    auto step = [&](const std::vector<std::vector<uint32_t>>& fresh, bool all_logits,
                    const std::vector<int64_t>* targets = nullptr) {
      size_t t_len = 0;
      for (const auto& f : fresh) t_len = std::max(t_len, f.size());
      std::vector<int64_t> tok(B * t_len, 0), pos(B * t_len, 0);
      std::vector<uint8_t> valid(B * t_len, 0);
      for (size_t b = 0; b < B; ++b) {
        size_t pad = t_len - fresh[b].size();
        for (size_t t = 0; t < fresh[b].size(); ++t) {
          tok[b * t_len + pad + t] = fresh[b][t];
          pos[b * t_len + pad + t] = pos_next[b] + static_cast<int64_t>(t);
          valid[b * t_len + pad + t] = 1;
        }
        pos_next[b] += static_cast<int64_t>(fresh[b].size());
      }
      StepInput in;
      in.batch = static_cast<int>(B);
      in.T = static_cast<int>(t_len);
      in.tokens = tok.data();
      in.positions = pos.data();
      in.valid = valid.data();
      in.all_logits = all_logits;
      if (targets) in.targets = targets->data();
      std::unique_ptr<Gatherer> g;
      if (s.engram) {
        g = std::make_unique<Gatherer>(*s.view, s.mc, s.table_layer);
        g->Start(canon, static_cast<int>(t_len), valid);
        res.staging_bytes = std::max<uint64_t>(
            res.staging_bytes, B * t_len * s.mc.memory_dim() * 4 * s.table_layer.size());
        in.engram_rows = [&g](size_t k) { return g->Rows(k); };
      }
      model->Forward(in, &logits);
      if (g) g->Finish(&lookups, &hits, &seq_lookups, &seq_hits);
      return t_len;
    };
    base::Stopwatch prompt_sw;
    if (o.perplexity) {
      // Teacher forcing over windows of at most `window` tokens (a fresh KV cache each; Engram
      // history runs on across windows): every token after a document's first is scored.
      const size_t window = std::min<size_t>(to.max_seq, 512);
      std::vector<std::vector<uint32_t>> all_ids = ids, all_canon = canon;
      for (size_t b = 0; b < B; ++b) {
        for (size_t w0 = 0; w0 < all_ids[b].size(); w0 += window) {
          const size_t w1 = std::min(all_ids[b].size(), w0 + window);
          model->Reset();
          std::fill(pos_next.begin(), pos_next.end(), 0);
          std::vector<std::vector<uint32_t>> fresh(B), hist(B);
          for (size_t k = 0; k < B; ++k) {
            // Only sequence b advances; the others take a one-token pad step that is ignored.
            fresh[k] = k == b
                           ? std::vector<uint32_t>(all_ids[b].begin() + w0, all_ids[b].begin() + w1)
                           : std::vector<uint32_t>{0};
            hist[k] = k == b
                          ? std::vector<uint32_t>(all_canon[b].begin(), all_canon[b].begin() + w1)
                          : std::vector<uint32_t>{0};
          }
          canon = hist;
          // Position t predicts token t + 1 (the last position of the document predicts nothing).
          std::vector<int64_t> tgt(w1 - w0, -1);
          for (size_t t = w0; t < w1; ++t)
            if (t + 1 < all_ids[b].size()) tgt[t - w0] = all_ids[b][t + 1];
          if (o.dump_logits) {
            size_t t_len = step(fresh, true);
            for (size_t t = 0; t < t_len; ++t)
              pr[b].logits.emplace_back(logits.begin() + t * V, logits.begin() + (t + 1) * V);
            model->Reset();
            std::fill(pos_next.begin(), pos_next.end(), 0);
          }
          step(fresh, true, &tgt);
          for (size_t t = w0; t < w1; ++t)
            if (tgt[t - w0] >= 0) {
              pr[b].nll += logits[t - w0];
              pr[b].scored_tokens++;
            }
          res.prompt_tokens += w1 - w0;
        }
      }
      res.prompt_seconds += prompt_sw.Seconds();
    } else {
      step(ids, false);
      res.prompt_seconds += prompt_sw.Seconds();
      for (size_t b = 0; b < B; ++b) res.prompt_tokens += ids[b].size();
      base::Stopwatch eval_sw;
      std::vector<bool> done(B, false);
      const int n_predict = o.n_predict < 0 ? INT_MAX : o.n_predict;
      std::vector<float> penalised;
      for (int n = 0; n < n_predict; ++n) {
        std::vector<std::vector<uint32_t>> next(B);
        for (size_t b = 0; b < B; ++b) {
          const float* lg = logits.data() + b * V;
          if (o.dump_logits && !done[b]) pr[b].logits.emplace_back(lg, lg + V);
          if (o.repeat_penalty != 1.0 && o.repeat_last_n != 0 && !done[b]) {
            penalised.assign(lg, lg + V);
            ApplyRepeatPenalty(ids[b], o, &penalised);
            lg = penalised.data();
          }
          uint32_t t = Sample(lg, V, o, &rng[b]);
          next[b] = {t};
          if (done[b]) continue;
          if (ids[b].size() + 1 > static_cast<size_t>(to.max_seq)) {
            done[b] = true;
            rep.Log(LogLevel::kNote, "request " + std::to_string(first + b + 1) +
                                         ": stopped at the context limit of " +
                                         std::to_string(to.max_seq) + " tokens");
            continue;
          }
          if (s.mc.eos_token_id >= 0 && t == static_cast<uint32_t>(s.mc.eos_token_id)) {
            done[b] = true;
            continue;
          }
          pr[b].output_ids.push_back(t);
          res.eval_tokens++;
          ids[b].push_back(t);
          canon[b].push_back(s.Canonical(t));
        }
        if (n + 1 == n_predict || std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
          break;
        step(next, false);
      }
      res.eval_seconds += eval_sw.Seconds();
    }
    for (size_t b = 0; b < B; ++b) {
      pr[b].text = s.tok->Decode(pr[b].output_ids);
      pr[b].engram_lookups = seq_lookups[b];
      pr[b].engram_hits = seq_hits[b];
      pr[b].bypass = s.engram && pr[b].prompt_ids.size() < N;
      const std::string req = "[engram] request " + std::to_string(first + b + 1) + ": ";
      if (!s.engram) continue;
      if (pr[b].bypass)
        rep.Log(LogLevel::kInfo,
                req + "engram bypass: the prompt has " + std::to_string(pr[b].prompt_ids.size()) +
                    " token(s), fewer than the n-gram order " + std::to_string(N) +
                    ", so its first positions have no full n-gram (normal, not an error)");
      char line[200];
      double rate = pr[b].engram_lookups ? static_cast<double>(pr[b].engram_hits) /
                                               static_cast<double>(pr[b].engram_lookups)
                                         : 0;
      std::snprintf(line, sizeof line,
                    "engram_hit_rate: %.4f (%llu hits / %llu lookups), engram lookup miss: %llu",
                    rate, static_cast<unsigned long long>(pr[b].engram_hits),
                    static_cast<unsigned long long>(pr[b].engram_lookups),
                    static_cast<unsigned long long>(pr[b].engram_lookups - pr[b].engram_hits));
      rep.Log(LogLevel::kInfo, req + line);
      if (pr[b].engram_lookups == 0)
        rep.Log(
            LogLevel::kInfo,
            req +
                "engram_hit_rate is 0 because no position has a full n-gram (the input is shorter "
                "than order 2)");
      else if (std::string note =
                   table::LowHitRateNote(rate, pr[b].engram_lookups, corpus_rate, s.view->layout());
               !note.empty() && low_hit_requests++ == 0)
        rep.Log(LogLevel::kWarning, req + note);
    }
    for (auto& p : pr) res.prompts.push_back(std::move(p));
  }
  if (low_hit_requests > 1)
    rep.Log(LogLevel::kWarning, "[engram] engram_hit_rate low (as above) in " +
                                    std::to_string(low_hit_requests) + " of " +
                                    std::to_string(o.prompts.size()) + " requests");
  if (s.engram) {
    auto status = table::Status(s.view->reader().path());
    res.table_resident_bytes = status.resident_bytes;
  }
  res.total_seconds = total.Seconds();
  return res;
}

namespace {

// Identity of the table file as the last reload saw it: a committed append grows the file, a
// fold replaces it (new inode); either changes the stamp.
struct FileStamp {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// Bytes at the end of `text` that may not be emitted yet: a trailing incomplete UTF-8 sequence
// or U+FFFD (a token that ends inside a character), or a suffix that starts a stop string.
size_t Holdback(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  // Incomplete UTF-8 at the end.
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > k) hold = k;
    break;
  }
  static const std::string kReplacement = "\xEF\xBF\xBD";
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0)
    hold = std::max<size_t>(hold, 3);
  for (const auto& st : stop)
    for (size_t k = std::min(st.size() - 1, text.size()); k > hold; --k)
      if (text.compare(text.size() - k, k, st, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

class SessionImpl final : public Session {
 public:
  SessionImpl(const RunOptions& o, base::Reporter& rep) : rep_(rep) {
    RunResult res;
    LoadSetup(o, rep, s_, res);
    TransformerOptions to;
    to.dtype = o.dtype.empty() ? s_.cfg.model.dtype : o.dtype;
    if (to.dtype == "bf16") to.dtype = "bfloat16";
    if (to.dtype == "f32") to.dtype = "float32";
    to.kv_cache_dtype =
        o.kv_cache_dtype.empty() ? s_.cfg.inference.kv_cache_dtype : o.kv_cache_dtype;
    to.threads = o.threads;
    to.max_batch = std::max(
        1, o.max_batch > 0 ? o.max_batch : static_cast<int>(s_.cfg.inference.max_batch_size));
    to.max_seq = static_cast<int>(std::min<uint32_t>(s_.mc.max_position_embeddings, 4096));
    base::Stopwatch load_sw;
    model_ = Transformer::Load(s_.mc, to);
    if (s_.engram) rep.Log(LogLevel::kInfo, TableLoadedLine(res.table_seconds, res.device_bytes));
    info_.model_dir =
        s_.mc.dir.empty() ? (o.model_dir.empty() ? s_.cfg.model.path : o.model_dir) : s_.mc.dir;
    info_.model_name = s_.cfg.model.name;
    if (info_.model_name.empty()) {
      std::string d = info_.model_dir;
      while (d.size() > 1 && d.back() == '/') d.pop_back();
      info_.model_name =
          d.substr(d.find_last_of('/') == std::string::npos ? 0 : d.find_last_of('/') + 1);
    }
    info_.engram = s_.engram;
    info_.deterministic_addressing = s_.cfg.engram.deterministic_addressing;
    info_.max_batch = to.max_batch;
    info_.max_seq = to.max_seq;
    info_.eos_token_id = static_cast<int>(s_.mc.eos_token_id);
    info_.load_seconds = load_sw.Seconds() + res.table_seconds;
    tok_fp_ = s_.tok->Fingerprint();
    if (s_.engram) {
      info_.table_path = s_.view->reader().path();
      info_.ngram_order = s_.view->layout().spec.max_order;
      info_.low_hit_rate_note = [layout = s_.view->layout(),
                                 corpus_rate = table::CorpusHitRate(s_.view->reader())](
                                    double rate, uint64_t lookups) {
        return table::LowHitRateNote(rate, lookups, corpus_rate, layout);
      };
      stamp_ = Stamp(info_.table_path);
      view_ = std::shared_ptr<const format::TableView>(std::move(s_.view));
      state_.generation = 1;
      state_.journal_commits = view_->journal().n_commits;
      state_.journal_entries = view_->journal().committed.size();
      state_.file_bytes = stamp_.size;
    }
  }

  const SessionInfo& info() const noexcept override { return info_; }

  TableState table_state() const noexcept override {
    std::lock_guard<std::mutex> lock(state_mu_);
    return state_;
  }

  void GenerateBatch(const std::vector<GenerateRequest*>& reqs,
                     std::vector<GenerateResult>* results) noexcept override {
    results->assign(reqs.size(), GenerateResult{});
    try {
      Batch(reqs, *results);
    } catch (const Error& e) {
      Fail(*results, e.what(), static_cast<int>(e.code()));
    } catch (const std::exception& e) {
      Fail(*results, std::string("internal error in the model module: ") + e.what(),
           static_cast<int>(Code::kInternal));
    }
  }

 private:
  static void Fail(std::vector<GenerateResult>& results, const std::string& msg, int code) {
    for (auto& r : results)
      if (r.finish_reason.empty() || r.finish_reason == "cancelled") {
        r.finish_reason = "error";
        r.error = msg;
        r.error_code = code;
      }
  }

  // Picks up a committed append (the file grew) or a fold (the file was replaced) between
  // batches. A state that cannot be opened leaves the last good one serving.
  void MaybeReload() {
    if (!s_.engram) return;
    const std::string& path = info_.table_path;
    FileStamp st = Stamp(path);
    if (st.ino == 0 || st == stamp_) return;
    stamp_ = st;  // taken before opening: a change during the open is seen next time
    try {
      format::ViewOptions vo;
      vo.deterministic_addressing = s_.cfg.engram.deterministic_addressing;
      vo.open.use_mmap = s_.cfg.table.mmap;
      std::shared_ptr<const format::TableView> v = format::TableView::Open(path, vo);
      CheckTableAgainstModel(v->layout(), s_.mc, tok_fp_, path);
      ENGRAM_CHECK(v->layout().canon_map.empty() || v->layout().canon_map == s_.canon,
                   Code::kInvalidArgument,
                   path << " now has another canonical-id map than the table loaded at start; "
                           "restart serve to use it");
      std::string line;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        view_ = std::move(v);
        state_.generation++;
        state_.journal_commits = view_->journal().n_commits;
        state_.journal_entries = view_->journal().committed.size();
        state_.file_bytes = st.size;
        state_.stale = false;
        line = "[engram] table generation " + std::to_string(state_.generation) + ": " + path +
               " (" + std::to_string(state_.journal_commits) + " journal commits, " +
               std::to_string(state_.journal_entries) + " entries overlaid)";
      }
      stale_said_ = false;
      rep_.Log(LogLevel::kInfo, line);
    } catch (const Error& e) {
      const std::string what = e.what();
      uint64_t gen;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        gen = state_.generation;
        if (e.code() == Code::kConfig &&
            what.find("deterministic addressing requires") != std::string::npos)
          state_.stale = true;
      }
      if (what.find("deterministic addressing requires") != std::string::npos) {
        if (!stale_said_)
          rep_.Log(LogLevel::kWarning,
                   "[engram] " + path +
                       " has appended entries that are not folded; with "
                       "deterministic addressing the server keeps serving table generation " +
                       std::to_string(gen) +
                       " (the last folded state): run 'engramctl sort-buckets " + path +
                       "' to serve them (or set engram.deterministic_addressing = false)");
        stale_said_ = true;
      } else {
        rep_.Log(LogLevel::kWarning, "[engram] table change not picked up, generation " +
                                         std::to_string(gen) + " keeps serving: " + what);
      }
    }
  }

  void Batch(const std::vector<GenerateRequest*>& reqs, std::vector<GenerateResult>& res) {
    ENGRAM_CHECK(reqs.size() <= static_cast<size_t>(info_.max_batch), Code::kInternal,
                 "batch of " << reqs.size() << " requests, the session holds " << info_.max_batch);
    MaybeReload();
    std::shared_ptr<const format::TableView> view;
    TableState state;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      view = view_;
      state = state_;
    }
    const uint32_t V = s_.mc.vocab_size;
    const uint32_t N = s_.engram ? view->layout().spec.max_order : 2;
    // Requests that can run (the others finish with an error now).
    std::vector<size_t> live;
    std::vector<std::vector<uint32_t>> ids, canon;
    for (size_t i = 0; i < reqs.size(); ++i) {
      res[i].table = state;
      res[i].batch_size = static_cast<int>(reqs.size());
      std::vector<uint32_t> p = s_.tok->Encode(reqs[i]->prompt);
      std::string err;
      if (p.empty()) err = "the prompt is empty after tokenization; send some text";
      for (uint32_t id : p)
        if (id >= V) err = "token id " + std::to_string(id) + " is outside the model's vocabulary";
      if (err.empty() && p.size() + static_cast<size_t>(std::max(0, reqs[i]->max_tokens)) >
                             static_cast<size_t>(info_.max_seq))
        err = "the prompt has " + std::to_string(p.size()) + " tokens and max_tokens is " +
              std::to_string(reqs[i]->max_tokens) + ", more than the model's context of " +
              std::to_string(info_.max_seq) + " tokens; shorten the prompt or lower max_tokens";
      res[i].prompt_tokens = p.size();
      if (!err.empty()) {
        res[i].finish_reason = "error";
        res[i].error = err;
        res[i].error_code = static_cast<int>(Code::kInvalidArgument);
        continue;
      }
      res[i].bypass = s_.engram && p.size() < N;
      live.push_back(i);
      canon.push_back(s_.Canonical(p));
      ids.push_back(std::move(p));
    }
    const size_t B = live.size();
    if (B == 0) return;
    model_->Reset();
    std::vector<std::mt19937_64> rng;
    std::vector<RunOptions> samp(B);
    for (size_t b = 0; b < B; ++b) {
      const GenerateRequest& q = *reqs[live[b]];
      rng.emplace_back(q.seed);
      samp[b].temperature = q.temperature;
      samp[b].top_k = q.top_k;
      samp[b].top_p = q.top_p;
    }
    std::vector<int64_t> pos_next(B, 0);
    std::vector<float> logits;
    std::vector<uint64_t> lk(B), ht(B);
    auto step = [&](const std::vector<std::vector<uint32_t>>& fresh) {
      size_t t_len = 0;
      for (const auto& f : fresh) t_len = std::max(t_len, f.size());
      std::vector<int64_t> tok(B * t_len, 0), pos(B * t_len, 0);
      std::vector<uint8_t> valid(B * t_len, 0);
      for (size_t b = 0; b < B; ++b) {
        size_t pad = t_len - fresh[b].size();
        for (size_t t = 0; t < fresh[b].size(); ++t) {
          tok[b * t_len + pad + t] = fresh[b][t];
          pos[b * t_len + pad + t] = pos_next[b] + static_cast<int64_t>(t);
          valid[b * t_len + pad + t] = 1;
        }
        pos_next[b] += static_cast<int64_t>(fresh[b].size());
      }
      StepInput in;
      in.batch = static_cast<int>(B);
      in.T = static_cast<int>(t_len);
      in.tokens = tok.data();
      in.positions = pos.data();
      in.valid = valid.data();
      std::unique_ptr<Gatherer> g;
      if (s_.engram) {
        g = std::make_unique<Gatherer>(*view, s_.mc, s_.table_layer);
        g->Start(canon, static_cast<int>(t_len), valid);
        in.engram_rows = [&g](size_t k) { return g->Rows(k); };
      }
      model_->Forward(in, &logits);
      std::fill(lk.begin(), lk.end(), 0);
      std::fill(ht.begin(), ht.end(), 0);
      uint64_t l = 0, h = 0;
      if (g) g->Finish(&l, &h, &lk, &ht);
    };
    base::Stopwatch prompt_sw;
    step(ids);
    for (size_t b = 0; b < B; ++b) {
      res[live[b]].prompt_lookups = lk[b];
      res[live[b]].prompt_hits = ht[b];
    }
    const double prompt_seconds = prompt_sw.Seconds();
    base::Stopwatch eval_sw;
    std::vector<bool> done(B, false);
    std::vector<std::vector<uint32_t>> out(B);
    std::vector<size_t> emitted(B, 0);
    int max_new = 0;
    for (size_t b = 0; b < B; ++b) max_new = std::max(max_new, reqs[live[b]]->max_tokens);
    auto finish = [&](size_t b, const std::string& reason, const std::string& text) {
      GenerateResult& r = res[live[b]];
      const GenerateRequest& q = *reqs[live[b]];
      if (reason != "cancelled" && emitted[b] < text.size() && q.on_text &&
          !q.on_text(std::string_view(text).substr(emitted[b])))
        r.finish_reason = "cancelled";
      else
        r.finish_reason = reason;
      r.text = text;
      r.completion_tokens = out[b].size();
      done[b] = true;
    };
    for (size_t b = 0; b < B; ++b)
      if (reqs[live[b]]->max_tokens <= 0) finish(b, "length", "");
    for (int n = 0; n < max_new; ++n) {
      std::vector<std::vector<uint32_t>> next(B);
      for (size_t b = 0; b < B; ++b) {
        const float* lg = logits.data() + b * V;
        uint32_t t = Sample(lg, V, samp[b], &rng[b]);
        next[b] = {t};
        if (done[b]) continue;
        const GenerateRequest& q = *reqs[live[b]];
        if (s_.mc.eos_token_id >= 0 && t == static_cast<uint32_t>(s_.mc.eos_token_id)) {
          finish(b, "stop", s_.tok->Decode(out[b]));
          continue;
        }
        out[b].push_back(t);
        ids[b].push_back(t);
        canon[b].push_back(s_.Canonical(t));
        std::string text = s_.tok->Decode(out[b]);
        size_t cut = std::string::npos;
        for (const auto& st : q.stop) {
          if (st.empty()) continue;
          size_t from = emitted[b] >= st.size() ? emitted[b] - st.size() + 1 : 0;
          size_t p = text.find(st, from);
          if (p != std::string::npos) cut = std::min(cut, p);
        }
        if (cut != std::string::npos) {
          finish(b, "stop", text.substr(0, cut));
          continue;
        }
        if (static_cast<int>(out[b].size()) >= q.max_tokens) {
          finish(b, "length", text);
          continue;
        }
        size_t safe = text.size() - Holdback(text, q.stop);
        if (safe > emitted[b] && q.on_text) {
          if (!q.on_text(std::string_view(text).substr(emitted[b], safe - emitted[b]))) {
            emitted[b] = safe;
            finish(b, "cancelled", text);
            continue;
          }
          emitted[b] = safe;
        }
      }
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
      step(next);
      for (size_t b = 0; b < B; ++b) {
        // Lookups of the step that fed each unfinished request's newest token.
        if (!done[b]) {
          res[live[b]].gen_lookups += lk[b];
          res[live[b]].gen_hits += ht[b];
        }
      }
    }
    const double eval_seconds = eval_sw.Seconds();
    for (size_t b = 0; b < B; ++b) {
      if (!done[b]) finish(b, "length", s_.tok->Decode(out[b]));
      res[live[b]].prompt_seconds = prompt_seconds;
      res[live[b]].eval_seconds = eval_seconds;
    }
  }

  base::Reporter& rep_;
  Setup s_;
  std::unique_ptr<Transformer> model_;
  SessionInfo info_;
  uint64_t tok_fp_ = 0;
  FileStamp stamp_;
  bool stale_said_ = false;
  mutable std::mutex state_mu_;
  std::shared_ptr<const format::TableView> view_;
  TableState state_;
};

}  // namespace

}  // namespace engram::model

extern "C" int engram_model_run_v1(const engram::model::RunOptions* opts,
                                   engram::base::Reporter* reporter,
                                   engram::model::RunResult* result, std::string* error,
                                   int* error_code) {
  return engram::model::CatchForCaller([&] { *result = engram::model::RunImpl(*opts, *reporter); },
                                       error, error_code);
}

extern "C" int engram_model_session_v1(const engram::model::RunOptions* opts,
                                       engram::base::Reporter* reporter,
                                       engram::model::Session** out, std::string* error,
                                       int* error_code) {
  // Ownership crosses the plugin boundary as a raw pointer (C linkage); the caller deletes it.
  return engram::model::CatchForCaller(
      [&] { *out = new engram::model::SessionImpl(*opts, *reporter); }, error, error_code);
}

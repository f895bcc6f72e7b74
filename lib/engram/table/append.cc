// Append: parse and validate entries, then lock, truncate any uncommitted tail, write entry
// records and one commit record, fsync.
#include "engram/table/append.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_map>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/json.h"
#include "engram/base/resource.h"
#include "engram/format/reader.h"
#include "engram/format/safetensors.h"
#include "engram/format/view.h"
#include "engram/format/writer_lock.h"
#include "engram/hash/checksum.h"
#include "engram/hash/ngram_hash.h"
#include "engram/table/entries.h"
#include "engram/table/fold.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::table {

namespace {

using Entry = PreparedEntry;

// Problems of an entries file: "N bad entries in FILE; nothing was written:" and the lines.
class Problems {
 public:
  explicit Problems(const std::string& file) : file_(file), list_(file) {}
  void Add(size_t line, const std::string& what) { list_.Add(line, what); }
  bool empty() const noexcept { return list_.empty(); }
  void ThrowIfAny() {
    list_.ThrowIfAny([&](size_t n) {
      return std::to_string(n) + " bad entr" + (n == 1 ? "y" : "ies") + " in " + file_;
    });
  }

 private:
  std::string file_;
  base::LineProblems list_;
};

// Reads values of a float tensor row as f32.
bool TensorRow(const format::SafetensorsFile& f, const format::TensorInfo& t, uint64_t row,
               uint32_t width, std::vector<float>* out) {
  if (t.shape.size() != 2 || t.shape[1] != width || row >= t.shape[0]) return false;
  auto d = f.Data(t);
  out->resize(width);
  for (uint32_t i = 0; i < width; ++i) {
    uint64_t k = row * width + i;
    switch (t.dtype) {
      case format::StDType::kF32:
        std::memcpy(&(*out)[i], d.data() + k * 4, 4);
        break;
      case format::StDType::kBF16: {
        uint16_t h;
        std::memcpy(&h, d.data() + k * 2, 2);
        (*out)[i] = base::BF16ToFloat(h);
        break;
      }
      case format::StDType::kF16: {
        uint16_t h;
        std::memcpy(&h, d.data() + k * 2, 2);
        (*out)[i] = base::F16ToFloat(h);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

bool IntAt(const format::SafetensorsFile& f, const format::TensorInfo& t, uint64_t k, int64_t* v) {
  auto d = f.Data(t);
  switch (t.dtype) {
    case format::StDType::kI64:
      std::memcpy(v, d.data() + k * 8, 8);
      return true;
    case format::StDType::kI32: {
      int32_t x;
      std::memcpy(&x, d.data() + k * 4, 4);
      *v = x;
      return true;
    }
    case format::StDType::kU32: {
      uint32_t x;
      std::memcpy(&x, d.data() + k * 4, 4);
      *v = x;
      return true;
    }
    case format::StDType::kI16: {
      int16_t x;
      std::memcpy(&x, d.data() + k * 2, 2);
      *v = x;
      return true;
    }
    case format::StDType::kU16: {
      uint16_t x;
      std::memcpy(&x, d.data() + k * 2, 2);
      *v = x;
      return true;
    }
    default:
      return false;
  }
}

std::vector<Entry> ParseSafetensors(const AppendOptions& o, const format::Layout& l, Problems* pr) {
  std::vector<Entry> out;
  auto f = format::SafetensorsFile::Open(o.entries);
  const format::TensorInfo* ids = f->Find("canonical_ids");
  bool canonical = ids != nullptr;
  if (!ids) ids = f->Find("ids");
  const format::TensorInfo* values = f->Find("values");
  if (!ids || !values) {
    pr->Add(0,
            "a safetensors entries file needs an \"ids\" (or \"canonical_ids\") tensor [E, n] and "
            "a \"values\" tensor [E, " +
                std::to_string(l.row_dim) + "]");
    return out;
  }
  if (ids->shape.size() != 2 || values->shape.size() != 2 || ids->shape[0] != values->shape[0]) {
    pr->Add(0, "\"ids\" must be [E, n] and \"values\" [E, row_dim] with the same E");
    return out;
  }
  if (values->shape[1] != l.row_dim) {
    pr->Add(0, "\"values\" rows hold " + std::to_string(values->shape[1]) +
                   " values, the table's rows " + std::to_string(l.row_dim));
    return out;
  }
  const format::TensorInfo* layers = f->Find("layers");
  const format::TensorInfo* heads = f->Find("heads");
  const uint64_t E = ids->shape[0], n = ids->shape[1];
  for (uint64_t e = 0; e < E; ++e) {
    Entry en;
    en.line = e + 1;
    bool ok = true;
    for (uint64_t k = 0; k < n && ok; ++k) {
      int64_t v;
      if (!IntAt(*f, *ids, e * n + k, &v) || v < 0 || v > UINT32_MAX) {
        pr->Add(e + 1, "ids must be non-negative integers (I16/U16/I32/U32/I64)");
        ok = false;
        break;
      }
      uint32_t c = static_cast<uint32_t>(v);
      if (canonical) {
        if (c >= l.spec.canonical_vocab) {
          pr->Add(e + 1, "canonical id " + std::to_string(c) + " is outside the vocabulary");
          ok = false;
        }
      } else if (!l.Canonical(c, &c)) {
        pr->Add(e + 1, "token id " + std::to_string(v) + " is outside the table's vocabulary");
        ok = false;
      }
      en.canon.push_back(c);
    }
    if (!ok) continue;
    if (!TensorRow(*f, *values, e, l.row_dim, &en.value)) {
      pr->Add(e + 1, "\"values\" must be F32, BF16 or F16");
      continue;
    }
    if (layers && !IntAt(*f, *layers, e, &en.layer_id))
      pr->Add(e + 1, "\"layers\" must be an integer tensor [E]");
    if (heads && !IntAt(*f, *heads, e, &en.head))
      pr->Add(e + 1, "\"heads\" must be an integer tensor [E]");
    out.push_back(std::move(en));
  }
  return out;
}

std::vector<Entry> ParseJsonl(const AppendOptions& o, const format::Layout& l,
                              const tokenizer::Tokenizer* tok, Problems* pr) {
  std::vector<Entry> out;
  std::map<std::string, std::unique_ptr<format::SafetensorsFile>> refs;
  // No valid entry is larger than this: a value of row_dim numbers (64 bytes each is generous),
  // an n-gram of max_order ids, a few keys. Longer lines, and lines with more values than an
  // entry can hold, are refused before any of them is held or parsed (memory stays
  // O(max_line) however hostile the file).
  EntryLimits limits;
  limits.max_items = std::max<size_t>({l.row_dim, l.spec.max_order, 16});
  limits.max_total_items = 2 * limits.max_items + 64;
  limits.max_line_bytes = (64u << 10) + 64 * static_cast<size_t>(l.row_dim);
  auto on_problem = [&](size_t line_no, EntryProblem kind, std::string what) {
    if (kind == EntryProblem::kTooLong)
      what += "; no valid entry is (a value holds " + std::to_string(l.row_dim) + " numbers)";
    if (kind == EntryProblem::kTooLarge)
      what += "; no valid entry does (a value holds " + std::to_string(l.row_dim) +
              " numbers, an n-gram at most " + std::to_string(l.spec.max_order) + " ids)";
    pr->Add(line_no, what);
  };
  ForEachEntry(
      o.entries, limits,
      [&](size_t line_no, const base::Json& j) {
        Entry en;
        en.line = line_no;
        bool ok = true;
        int inputs = 0;
        for (const auto& [k, v] : j.members()) {
          if (k == "text" || k == "ids" || k == "canonical_ids")
            ++inputs;
          else if (k != "value" && k != "value_ref" && k != "layer" && k != "head" &&
                   k != "order" && k != "note") {
            pr->Add(line_no, "unknown key \"" + k +
                                 "\" (known: text, ids, canonical_ids, value, value_ref, layer, "
                                 "head, order, note)");
            ok = false;
          }
        }
        if (!ok) return;
        if (inputs != 1) {
          pr->Add(line_no, "give exactly one of \"text\", \"ids\", \"canonical_ids\"");
          return;
        }
        if (const base::Json* t = j.Find("text")) {
          if (!t->is_string() || t->as_string().empty()) {
            pr->Add(line_no, "\"text\" must be a non-empty string");
            return;
          }
          if (!tok) {
            pr->Add(line_no,
                    "\"text\" entries need the table's tokenizer: give --tokenizer tokenizer.json");
            return;
          }
          for (uint32_t id : tok->Encode(t->as_string())) {
            en.ids.push_back(id);
            uint32_t c;
            if (!l.Canonical(id, &c)) {
              pr->Add(line_no,
                      "token id " + std::to_string(id) + " is outside the table's vocabulary");
              ok = false;
              break;
            }
            en.canon.push_back(c);
          }
        } else {
          bool canonical = j.Find("canonical_ids") != nullptr;
          const base::Json* a = canonical ? j.Find("canonical_ids") : j.Find("ids");
          if (!a->is_array()) {
            pr->Add(line_no, "\"ids\" must be an array of integers");
            return;
          }
          for (const auto& x : a->items()) {
            auto v = x.as_uint64();
            uint32_t c = 0;
            if (!v || *v > UINT32_MAX) {
              pr->Add(line_no, "ids must be non-negative integers");
              ok = false;
              break;
            }
            c = static_cast<uint32_t>(*v);
            if (!canonical) en.ids.push_back(c);
            bool in = canonical ? c < l.spec.canonical_vocab : l.Canonical(c, &c);
            if (!in) {
              pr->Add(line_no, (canonical ? "canonical id " : "token id ") + std::to_string(*v) +
                                   " is outside the table's vocabulary");
              ok = false;
              break;
            }
            en.canon.push_back(c);
          }
        }
        if (!ok) return;
        if (const base::Json* ord = j.Find("order")) {
          auto v = ord->as_uint64();
          if (!v || *v != en.canon.size()) {
            pr->Add(line_no, "\"order\" = " + (v ? std::to_string(*v) : std::string("?")) +
                                 " but the n-gram has " + std::to_string(en.canon.size()) +
                                 " tokens");
            return;
          }
        }
        for (const char* key : {"layer", "head"}) {
          const base::Json* x = j.Find(key);
          if (!x || (x->is_string() && x->as_string() == "all")) continue;
          auto v = x->as_int64();
          if (!v || *v < 0) {
            pr->Add(line_no,
                    std::string("\"") + key + "\" must be a non-negative integer or \"all\"");
            ok = false;
            continue;
          }
          (std::string(key) == "layer" ? en.layer_id : en.head) = *v;
        }
        if (!ok) return;
        const base::Json* val = j.Find("value");
        const base::Json* ref = j.Find("value_ref");
        if ((val != nullptr) == (ref != nullptr)) {
          pr->Add(line_no, "give exactly one of \"value\" (an array of " +
                               std::to_string(l.row_dim) +
                               " numbers) and \"value_ref\" ({\"file\", \"tensor\", \"row\"})");
          return;
        }
        if (val) {
          if (!val->is_array()) {
            pr->Add(line_no, "\"value\" must be an array of numbers");
            return;
          }
          for (const auto& x : val->items()) {
            if (!x.is_number() || !std::isfinite(x.as_double())) {
              pr->Add(line_no, "\"value\" holds a non-number or a non-finite number");
              ok = false;
              break;
            }
            en.value.push_back(static_cast<float>(x.as_double()));
          }
        } else {
          const base::Json* file = ref->Find("file");
          const base::Json* tensor = ref->Find("tensor");
          const base::Json* row = ref->Find("row");
          if (!file || !file->is_string() || !tensor || !tensor->is_string() || !row ||
              !row->as_uint64()) {
            pr->Add(
                line_no,
                "\"value_ref\" needs \"file\" (string), \"tensor\" (string) and \"row\" (integer)");
            return;
          }
          std::string path = file->as_string();
          if (!path.empty() && path[0] != '/') path = base::DirName(o.entries) + "/" + path;
          auto& sf = refs[path];
          try {
            if (!sf) sf = format::SafetensorsFile::Open(path);
          } catch (const Error& e) {
            pr->Add(line_no, std::string("value_ref: ") + e.what());
            return;
          }
          const format::TensorInfo* t = sf->Find(tensor->as_string());
          if (!t || !TensorRow(*sf, *t, *row->as_uint64(), l.row_dim, &en.value)) {
            pr->Add(line_no, "value_ref: no F32/BF16/F16 tensor \"" + tensor->as_string() +
                                 "\" of shape [rows, " + std::to_string(l.row_dim) + "] with row " +
                                 std::to_string(*row->as_uint64()) + " in " + path);
            return;
          }
        }
        if (!ok) return;
        out.push_back(std::move(en));
      },
      on_problem);
  return out;
}

// Empty when the row, stored in the table's dtype, holds only finite values; else why not.
std::string NonFiniteProblem(const format::Layout& l, const std::vector<float>& value) {
  std::vector<uint8_t> enc(l.row_stride() + l.scale_stride());
  base::EncodeRow(l.dtype, value, enc.data(), enc.data() + l.row_stride());
  size_t i = base::FirstNonFinite(l.dtype, enc.data(), enc.data() + l.row_stride(), l.row_dim);
  if (i == l.row_dim) return {};
  std::ostringstream os;
  os << "value[" << i << "]";
  if (std::isfinite(value[i])) os << " = " << value[i];
  os << " does not fit the table's " << base::DTypeName(l.dtype)
     << " rows (largest finite magnitude " << base::MaxFinite(l.dtype) << "; it would be stored as "
     << (std::isnan(value[i]) ? "NaN" : "Inf")
     << "); scale the value or rebuild the table with a wider --dtype";
  return os.str();
}

}  // namespace

std::string AppendResult::ToJson() const {
  std::ostringstream os;
  os << "{\"entries\":" << entries << ",\"records\":" << records << ",\"facts\":" << facts
     << ",\"bytes\":" << bytes << ",\"journal_entries_before\":" << journal_entries_before
     << ",\"tail_truncated\":" << tail_truncated << ",\"seconds\":" << seconds
     << ",\"displaced\":[";
  for (size_t i = 0; i < displaced.size(); ++i) {
    const Displaced& d = displaced[i];
    os << (i ? "," : "") << "{\"line\":" << d.entry_line << ",\"layer\":" << d.layer_id
       << ",\"order\":" << d.order << ",\"head\":" << d.head << ",\"bucket\":" << d.bucket
       << ",\"previous_tag\":" << d.previous_tag << ",\"new_tag\":" << d.new_tag
       << ",\"previous_count\":" << d.previous_count << ",\"previous_ids\":[";
    for (size_t k = 0; k < d.previous_ids.size(); ++k) os << (k ? "," : "") << d.previous_ids[k];
    os << "]";
    if (!d.previous_texts.empty()) {
      os << ",\"previous_texts\":[";
      for (size_t k = 0; k < d.previous_texts.size(); ++k)
        os << (k ? "," : "") << base::JsonString(d.previous_texts[k]);
      os << "]";
    }
    os << "}";
  }
  os << "],\"ngrams\":[";
  for (size_t i = 0; i < ngrams.size(); ++i) {
    const NgramTokens& n = ngrams[i];
    os << (i ? "," : "") << "{\"line\":" << n.line << ",\"canonical_ids\":[";
    for (size_t k = 0; k < n.canon.size(); ++k) os << (k ? "," : "") << n.canon[k];
    os << "],\"ids\":[";
    for (size_t k = 0; k < n.ids.size(); ++k) os << (k ? "," : "") << n.ids[k];
    os << "],\"tokens\":[";
    for (size_t k = 0; k < n.tokens.size(); ++k)
      os << (k ? "," : "") << base::JsonString(n.tokens[k]);
    os << "],\"texts\":[";
    for (size_t k = 0; k < n.texts.size(); ++k)
      os << (k ? "," : "") << base::JsonString(n.texts[k]);
    os << "]}";
  }
  os << "]}";
  return os.str();
}

namespace {

// Each canonical id's first tokenizer id (canonical ids merge tokens that differ only in ways
// the hash ignores), to show an n-gram given as canonical ids.
std::vector<uint32_t> FirstTokenOfCanonical(const format::Layout& l,
                                            const tokenizer::Tokenizer& tok) {
  std::vector<uint32_t> first(l.spec.canonical_vocab, UINT32_MAX);
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) {
    uint32_t c;
    if (l.Canonical(id, &c) && c < first.size() && first[c] == UINT32_MAX) first[c] = id;
  }
  return first;
}

}  // namespace

AppendResult Append(const AppendOptions& o, base::Reporter& reporter) {
  base::Stopwatch sw;
  AppendResult res;
  // 1. Parse and validate everything against the table's layout before taking any lock.
  std::unique_ptr<format::Reader> reader = format::Reader::Open(o.table);
  const format::Layout layout = reader->layout();
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!o.tokenizer_path.empty()) {
    tok = tokenizer::Tokenizer::Load(o.tokenizer_path);
    ENGRAM_CHECK(
        layout.tokenizer_fingerprint == 0 || tok->Fingerprint() == layout.tokenizer_fingerprint,
        Code::kInvalidArgument,
        o.tokenizer_path << " is not the tokenizer " << o.table
                         << " was built with (fingerprints differ); "
                         << "text entries would land in the wrong rows");
  }
  Problems pr(o.entries);
  bool st =
      o.entries.size() > 12 && o.entries.compare(o.entries.size() - 12, 12, ".safetensors") == 0;
  std::vector<Entry> entries = o.prepared ? *o.prepared
                               : st       ? ParseSafetensors(o, layout, &pr)
                                          : ParseJsonl(o, layout, tok.get(), &pr);
  for (const Entry& e : entries) {
    if (e.canon.size() < hash::kMinOrder || e.canon.size() > layout.spec.max_order)
      pr.Add(e.line, "the n-gram has " + std::to_string(e.canon.size()) +
                         " token(s); this table holds orders 2.." +
                         std::to_string(layout.spec.max_order) +
                         " (an n-gram's length is its order)");
    if (e.value.size() != layout.row_dim)
      pr.Add(e.line, "\"value\" has " + std::to_string(e.value.size()) +
                         " numbers; this table's rows hold " + std::to_string(layout.row_dim));
    else if (std::string bad = NonFiniteProblem(layout, e.value); !bad.empty())
      pr.Add(e.line, bad);
    if (e.layer_id >= 0) {
      bool known = false;
      for (uint32_t id : layout.spec.layer_ids) known = known || id == e.layer_id;
      if (!known) {
        std::string ids;
        for (uint32_t id : layout.spec.layer_ids)
          ids += (ids.empty() ? "" : ", ") + std::to_string(id);
        pr.Add(e.line, "layer " + std::to_string(e.layer_id) +
                           " has no Engram branch in this table (layers: " + ids + ")");
      }
    }
    if (e.head >= static_cast<int64_t>(layout.spec.n_heads))
      pr.Add(e.line, "head " + std::to_string(e.head) + " does not exist (heads 0.." +
                         std::to_string(layout.spec.n_heads - 1) + ")");
  }
  if (entries.empty() && pr.empty() && !(o.facts && !o.facts->empty())) pr.Add(0, "no entries");
  pr.ThrowIfAny();
  res.entries = entries.size();
  std::vector<uint32_t> first_token;
  if (tok) first_token = FirstTokenOfCanonical(layout, *tok);
  auto decode = [&](const std::vector<uint32_t>& canon, const std::vector<uint32_t>& given,
                    NgramTokens* out) {
    out->canon = canon;
    out->ids = given;
    if (out->ids.size() != canon.size()) {
      out->ids.clear();
      for (uint32_t c : canon) out->ids.push_back(c < first_token.size() ? first_token[c] : 0);
    }
    for (uint32_t id : out->ids) {
      out->tokens.push_back(tok->IdToToken(id));
      out->texts.push_back(tok->TokenText(id));
    }
  };
  if (tok && !o.prepared)
    for (size_t i = 0; i < entries.size() && i < kDescribedEntries; ++i) {
      NgramTokens n;
      n.line = entries[i].line;
      decode(entries[i].canon, entries[i].ids, &n);
      res.ngrams.push_back(std::move(n));
    }

  // 2. Expand entries into journal entries (one per targeted row), encode values.
  std::vector<format::JournalEntry> records;
  std::vector<size_t> record_line;
  std::vector<uint8_t> enc(layout.row_stride() + layout.scale_stride());
  for (const Entry& e : entries) {
    base::EncodeRow(layout.dtype, e.value, enc.data(), enc.data() + layout.row_stride());
    const uint32_t n = static_cast<uint32_t>(e.canon.size());
    const uint32_t tag = hash::OwnerTag(e.canon.data(), n, layout.owner_tag_seed);
    for (size_t li = 0; li < layout.spec.n_layers(); ++li) {
      if (e.layer_id >= 0 && layout.spec.layer_ids[li] != e.layer_id) continue;
      for (uint32_t h = 0; h < layout.spec.n_heads; ++h) {
        if (e.head >= 0 && static_cast<uint32_t>(e.head) != h) continue;
        format::JournalEntry je;
        je.layer_index = static_cast<uint32_t>(li);
        je.order = n;
        je.head = h;
        je.bucket = hash::BucketOf(layout.spec, li, n, h, e.canon.data());
        je.row = layout.RowOf(layout.spec.SubIndex(li, n, h), je.bucket);
        je.tag = tag;
        je.ids = e.canon;
        je.value = enc;
        records.push_back(std::move(je));
        record_line.push_back(e.line);
      }
    }
  }
  reader.reset();

  // 3. Lock, re-open the locked file, and write.
  std::unique_ptr<format::WriterLock> lock;
  if (!o.dry_run) {
    lock = std::make_unique<format::WriterLock>(o.table, o.wait, "append", false, &reporter);
    format::RemoveStaleTempFiles(o.table);
    // A fold killed half way is completed first: the journal goes on from the folded base.
    CompleteInterruptedFold(lock->fd(), o.table, o.wait, reporter);
  }
  format::ViewOptions vo;
  vo.deterministic_addressing = false;
  auto view = format::TableView::Open(o.table, vo);
  const format::Layout& now = view->layout();
  ENGRAM_CHECK(now.spec.sizes == layout.spec.sizes && now.spec.seed == layout.spec.seed &&
                   now.row_dim == layout.row_dim && now.dtype == layout.dtype,
               Code::kIo,
               o.table << " was rebuilt with another layout while append ran; nothing was written, "
                          "run it again");
  const format::JournalState& js = view->journal();
  res.journal_entries_before = js.committed.size();
  // Displaced owners, seen through the base, the journal and this batch's earlier records.
  std::unordered_map<uint64_t, uint32_t> batch;
  for (size_t i = 0; i < records.size(); ++i) {
    const format::JournalEntry& r = records[i];
    uint32_t prev;
    const format::JournalEntry* from_journal = nullptr;
    if (auto it = batch.find(r.row); it != batch.end()) {
      prev = records[it->second].tag;
      from_journal = &records[it->second];
    } else {
      prev = view->Tag(r.row);
      from_journal = view->Overlay(r.row);
    }
    if (prev != hash::kNoOwner && prev != r.tag) {
      Displaced d;
      d.layer_id = now.spec.layer_ids[r.layer_index];
      d.order = r.order;
      d.head = r.head;
      d.bucket = r.bucket;
      d.previous_tag = prev;
      d.new_tag = r.tag;
      d.entry_line = record_line[i];
      if (from_journal) {
        d.previous_ids = from_journal->ids;
        if (tok) {
          NgramTokens n;
          decode(d.previous_ids, {}, &n);
          d.previous_texts = std::move(n.texts);
        }
      } else if (view->reader().has_stats())
        d.previous_count = view->reader().Stats(r.row).owner_count;
      res.displaced.push_back(std::move(d));
    }
    batch[r.row] = static_cast<uint32_t>(i);
  }
  const size_t n_facts = o.facts ? o.facts->size() : 0;
  ENGRAM_CHECK(n_facts == 0 || (view->reader().header().required_flags & format::kReqLedger),
               Code::kInvalidArgument,
               o.table << " is a format " << view->reader().header().version_major << "."
                       << view->reader().header().version_minor
                       << " table, which has no fact ledger to record the facts of append --fit "
                          "(later fits keep ledger facts); run 'engramctl sort-buckets "
                       << o.table << "' once to upgrade it to format 3.2; nothing was written");
  std::basic_string<uint8_t> buf;
  std::vector<uint64_t> sums(records.size() + n_facts);
  const uint64_t seed = view->reader().header().header_checksum;
  for (size_t i = 0; i < records.size(); ++i)
    format::AppendEntryRecord(&buf, js.next_seq + i, seed, records[i], now, &sums[i]);
  const uint64_t now_unix = base::UnixNow();
  for (size_t i = 0; i < n_facts; ++i) {
    format::Fact f = (*o.facts)[i];
    f.id = js.next_seq + records.size() + i;  // the record's seq: stable across folds
    f.created_unix = now_unix;
    format::AppendFactRecord(&buf, f.id, seed, f, &sums[records.size() + i]);
    res.fact_ids.push_back(f.id);
  }
  const size_t n_records = records.size() + n_facts;
  uint64_t commit_sum = 0;
  format::AppendCommitRecord(&buf, js.next_seq + n_records, seed, js.next_seq, n_records, now_unix,
                             hash::Checksum64(sums.data(), sums.size() * 8), &commit_sum);
  res.records = records.size();
  res.facts = n_facts;
  res.bytes = buf.size();
  res.tail_truncated = js.tail_bytes();
  if (o.dry_run) {
    res.seconds = sw.Seconds();
    return res;
  }
  if (js.tail_bytes()) {
    reporter.Log(base::LogLevel::kNote, o.table + ": dropping an uncommitted journal tail of " +
                                            std::to_string(js.tail_bytes()) + " bytes (" +
                                            js.tail_reason + ")");
    base::Truncate(lock->fd(), js.committed_end, o.table);
  }
  // A torn write (crash tests): half the records reach the file, then the process dies.
  if (std::getenv("ENGRAM_CRASH_AT") &&
      std::string(std::getenv("ENGRAM_CRASH_AT")) == "append-torn") {
    base::PwriteFull(lock->fd(), buf.data(), buf.size() / 2, js.committed_end, o.table);
    base::Fsync(lock->fd(), o.table);
    base::CrashPoint("append-torn");
  }
  try {
    base::PwriteFull(lock->fd(), buf.data(), buf.size(), js.committed_end, o.table);
    base::CrashPoint("append-before-fsync");
    base::Fsync(lock->fd(), o.table);
  } catch (const Error&) {
    // A full disk (or any write error) leaves a partial batch: drop it now, not at the next
    // append, so the disk gets its space back and the journal ends at its last commit.
    ::ftruncate(lock->fd(), static_cast<off_t>(js.committed_end));
    throw;
  }
  // The batch is committed; record it outside the journal (§5.6) so that a copy cut short
  // before this commit is told from a crash.
  base::CrashPoint("append-before-slot");
  format::WriteCommitSlot(lock->fd(), o.table, view->reader().header(), js,
                          js.committed_end + buf.size(), records.size(), commit_sum);
  res.seconds = sw.Seconds();
  return res;
}

}  // namespace engram::table

// Lookup: tokenize, canonicalise, address, and (with a table) compare owner tags.
#include "engram/table/lookup.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "engram/base/error.h"
#include "engram/base/json.h"
#include "engram/format/view.h"
#include "engram/hash/ngram_hash.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::table {

namespace {
std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

LookupResult Lookup(const LookupOptions& o) {
  LookupResult res;
  std::unique_ptr<format::TableView> view;
  if (!o.table_path.empty()) {
    format::ViewOptions vo;
    vo.deterministic_addressing = o.deterministic_addressing;
    vo.open.lock = format::ReadLock::kHold;  // one state for every lookup of the command
    view = format::TableView::Open(o.table_path, vo);
    res.layout = view->layout();
    res.with_table = true;
    res.journal_entries = view->journal().committed.size();
  } else {
    res.layout = format::ResolveLayout(o.layout);
  }
  const format::Layout& l = res.layout;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!o.layout.tokenizer_path.empty()) {
    tok = tokenizer::Tokenizer::Load(o.layout.tokenizer_path);
    if (view && l.tokenizer_fingerprint != 0 && tok->Fingerprint() != l.tokenizer_fingerprint)
      ENGRAM_THROW(Code::kInvalidArgument,
                   o.layout.tokenizer_path
                       << " (fingerprint " << Hex(tok->Fingerprint()) << ") is not the tokenizer "
                       << o.table_path << " was built with (fingerprint "
                       << Hex(l.tokenizer_fingerprint)
                       << "); its ids would address the wrong rows: use the table's tokenizer");
  }
  std::vector<uint32_t> canon;
  if (o.input == 0) {
    ENGRAM_CHECK(tok != nullptr, Code::kInvalidArgument,
                 "text input needs a tokenizer: give --tokenizer tokenizer.json (or --ids / "
                 "--canonical-ids)");
    std::vector<uint32_t> ids = tok->Encode(o.text);
    for (size_t i = 0; i < ids.size(); ++i) {
      LookupPosition p;
      p.pos = static_cast<uint32_t>(i);
      p.token_id = ids[i];
      p.token = tok->IdToToken(ids[i]);
      p.text = tok->TokenText(ids[i]);
      ENGRAM_CHECK(l.Canonical(ids[i], &p.canonical), Code::kInvalidArgument,
                   "token id " << ids[i] << " is outside the table's vocabulary of "
                               << l.canon_map.size()
                               << " ids: the table was built with another tokenizer");
      res.positions.push_back(std::move(p));
    }
  } else if (o.input == 1) {
    for (size_t i = 0; i < o.ids.size(); ++i) {
      LookupPosition p;
      p.pos = static_cast<uint32_t>(i);
      p.token_id = o.ids[i];
      if (tok) {
        p.token = tok->IdToToken(o.ids[i]);
        p.text = tok->TokenText(o.ids[i]);
      }
      ENGRAM_CHECK(l.Canonical(o.ids[i], &p.canonical), Code::kInvalidArgument,
                   "--ids: token id "
                       << o.ids[i] << " is outside the vocabulary ("
                       << (l.canon_map.empty() ? l.spec.canonical_vocab : l.canon_map.size())
                       << " ids)");
      res.positions.push_back(std::move(p));
    }
  } else {
    for (size_t i = 0; i < o.canonical_ids.size(); ++i) {
      LookupPosition p;
      p.pos = static_cast<uint32_t>(i);
      p.canonical = o.canonical_ids[i];
      ENGRAM_CHECK(p.canonical < l.spec.canonical_vocab, Code::kInvalidArgument,
                   "--canonical-ids: " << p.canonical << " is outside the canonical vocabulary of "
                                       << l.spec.canonical_vocab << " ids");
      res.positions.push_back(std::move(p));
    }
  }
  for (const auto& p : res.positions) canon.push_back(p.canonical);
  const size_t T = canon.size(), per = l.spec.per_layer(), heads = l.spec.n_heads;
  std::vector<uint64_t> buckets(T * per);
  for (auto& p : res.positions) p.cells.resize(l.spec.n_layers() * per);
  uint32_t scratch[hash::kMaxOrder];
  for (size_t li = 0; li < l.spec.n_layers(); ++li) {
    hash::ComputeBuckets(l.spec, li, canon, buckets.data());
    for (size_t t = 0; t < T; ++t)
      for (uint32_t n = hash::kMinOrder; n <= l.spec.max_order; ++n) {
        const uint32_t* g = hash::NgramAt(l.spec, canon, t, n, scratch);
        const uint32_t tag = hash::OwnerTag(g, n, l.owner_tag_seed);
        const bool full = t + 1 >= n;
        for (uint32_t h = 0; h < heads; ++h) {
          LookupCell& c = res.positions[t].cells[li * per + (n - hash::kMinOrder) * heads + h];
          c.bucket = buckets[t * per + (n - hash::kMinOrder) * heads + h];
          c.row = l.RowOf(l.spec.SubIndex(li, n, h), c.bucket);
          if (!view) continue;
          c.owner_tag = view->Tag(c.row);
          c.from_journal = view->Overlay(c.row) != nullptr;
          c.hit = c.owner_tag == tag ? 1 : 0;
          if (o.values) {
            c.values.resize(l.row_dim);
            view->DecodeRowTo(c.row, c.values);
          }
          if (full) {
            res.lookups++;
            res.hits += c.hit;
          }
        }
      }
  }
  if (T < l.spec.max_order) {
    res.bypass = true;
    res.notes.push_back(
        "engram bypass: the input has " + std::to_string(T) +
        " token(s), fewer than the n-gram order " + std::to_string(l.spec.max_order) +
        "; orders above " + std::to_string(T) +
        " have no full n-gram and are not counted (normal, not an error)" +
        (T < 2 ? "; engram_hit_rate is 0 because no position has a full n-gram" : ""));
  }
  if (view) {
    std::string note =
        LowHitRateNote(res.hit_rate(), res.lookups, CorpusHitRate(view->reader()), l);
    if (!note.empty()) res.notes.push_back(note);
  }
  return res;
}

double CorpusHitRate(const format::Reader& r) {
  try {
    base::Json p = base::Json::Parse(r.provenance(), "provenance", 32);
    if (p.is_object())
      if (const base::Json* v = p.Find("corpus_hit_rate"))
        if (v->is_number()) return v->as_double();
  } catch (const Error&) {
    // A provenance that is not JSON: fall back to the statistics.
  }
  return r.has_stats() ? format::OwnerShare(r.Section(format::SectionType::kStats)) : -1;
}

std::string LowHitRateNote(double rate, uint64_t lookups, double corpus_rate,
                           const format::Layout& l) {
  if (lookups < 8) return {};
  const bool known = corpus_rate > 0;
  if (rate >= (known ? 0.25 * corpus_rate : 0.3)) return {};
  char head[160];
  if (known)
    std::snprintf(head, sizeof head,
                  "engram_hit_rate %.2f is below a quarter of the %.2f this table scores on its "
                  "own build corpus",
                  rate, corpus_rate);
  else
    std::snprintf(head, sizeof head, "engram_hit_rate %.2f is below 0.3", rate);
  return std::string(head) +
         ": the text is far from that corpus, or the table was built with another tokenizer or "
         "n-gram order than this text uses (table: orders 2.." +
         std::to_string(l.spec.max_order) + ", " + std::to_string(l.spec.sizes[0]) +
         " buckets per sub-table, " +
         (l.tokenizer_fingerprint ? "tokenizer " + Hex(l.tokenizer_fingerprint)
                                  : std::string("no tokenizer")) +
         ")";
}

std::string LookupResult::ToText() const {
  std::ostringstream os;
  const auto& s = layout.spec;
  os << "addressing: " << hash::AddressingName(s.mode) << ", seed " << s.seed << ", orders 2.."
     << s.max_order << ", " << s.n_heads << " heads, canonical vocabulary " << s.canonical_vocab
     << ", pad " << s.pad_id << "\n";
  for (size_t li = 0; li < s.n_layers(); ++li) {
    os << "layer " << s.layer_ids[li] << ":";
    if (s.mode == hash::AddressingMode::kDeepSeek) {
      os << " multipliers";
      for (uint32_t k = 0; k < s.max_order; ++k) os << " " << s.multipliers[li * s.max_order + k];
    }
    for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) {
      os << "; order " << n << (s.mode == hash::AddressingMode::kNative ? " seeds" : " sizes");
      for (uint32_t h = 0; h < s.n_heads; ++h) {
        size_t sub = s.SubIndex(li, n, h);
        os << " " << (s.mode == hash::AddressingMode::kNative ? s.seeds[sub] : s.sizes[sub]);
      }
    }
    os << "\n";
  }
  const size_t per = s.per_layer();
  for (const auto& p : positions) {
    os << "#" << p.pos;
    if (p.token_id >= 0)
      os << " " << base::JsonString(p.text) << " (token " << base::JsonString(p.token) << ") id "
         << p.token_id;
    os << " canonical " << p.canonical << "\n";
    for (size_t li = 0; li < s.n_layers(); ++li)
      for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) {
        os << "  layer " << s.layer_ids[li] << " n" << n << (p.pos + 1 >= n ? " " : "*");
        for (uint32_t h = 0; h < s.n_heads; ++h) {
          const LookupCell& c = p.cells[li * per + (n - hash::kMinOrder) * s.n_heads + h];
          os << " " << c.bucket;
          if (c.hit >= 0) os << (c.hit ? "+" : "-");
        }
        os << "\n";
      }
  }
  if (positions.size() && positions[0].pos + 1 < s.max_order)
    os << "(* = history padded with the pad id: not counted in the hit rate; + hit, - miss)\n";
  for (const auto& n : notes) os << n << "\n";
  if (with_table) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "engram_hit_rate: %.4f (%llu hits / %llu lookups)\nengram lookup miss: %llu\n",
                  hit_rate(), static_cast<unsigned long long>(hits),
                  static_cast<unsigned long long>(lookups),
                  static_cast<unsigned long long>(lookups - hits));
    os << buf;
    if (journal_entries)
      os << "journal: " << journal_entries
         << " appended entries overlay the base (last writer wins)\n";
  }
  return os.str();
}

std::string LookupResult::ToJson() const {
  std::ostringstream os;
  const auto& s = layout.spec;
  auto arr = [](const auto& v) {
    std::string r = "[";
    for (size_t i = 0; i < v.size(); ++i) r += (i ? "," : "") + std::to_string(v[i]);
    return r + "]";
  };
  os << "{\"addressing\":{\"mode\":\"" << hash::AddressingName(s.mode) << "\",\"seed\":" << s.seed
     << ",\"layer_ids\":" << arr(s.layer_ids) << ",\"max_order\":" << s.max_order
     << ",\"n_heads\":" << s.n_heads << ",\"canonical_vocab\":" << s.canonical_vocab
     << ",\"pad_id\":" << s.pad_id << ",\"multipliers\":" << arr(s.multipliers)
     << ",\"sizes\":" << arr(s.sizes) << ",\"seeds\":" << arr(s.seeds) << "},\"positions\":[";
  const size_t per = s.per_layer();
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto& p = positions[i];
    os << (i ? "," : "") << "{\"pos\":" << p.pos;
    if (p.token_id >= 0)
      os << ",\"id\":" << p.token_id << ",\"token\":" << base::JsonString(p.token)
         << ",\"text\":" << base::JsonString(p.text);
    os << ",\"canonical\":" << p.canonical << ",\"layers\":[";
    for (size_t li = 0; li < s.n_layers(); ++li) {
      os << (li ? "," : "") << "{\"layer\":" << s.layer_ids[li] << ",\"orders\":[";
      for (uint32_t n = hash::kMinOrder; n <= s.max_order; ++n) {
        std::vector<uint64_t> b;
        std::string hits = "[", owners = "[";
        for (uint32_t h = 0; h < s.n_heads; ++h) {
          const LookupCell& c = p.cells[li * per + (n - hash::kMinOrder) * s.n_heads + h];
          b.push_back(c.bucket);
          hits += (h ? "," : "") + std::string(c.hit < 0 ? "null" : c.hit ? "true" : "false");
          owners += (h ? "," : "") + std::to_string(c.owner_tag);
        }
        os << (n > hash::kMinOrder ? "," : "") << "{\"order\":" << n
           << ",\"full\":" << (p.pos + 1 >= n ? "true" : "false") << ",\"buckets\":" << arr(b);
        if (with_table) os << ",\"hit\":" << hits << "],\"owner_tags\":" << owners << "]";
        if (!p.cells.empty() &&
            !p.cells[li * per + (n - hash::kMinOrder) * s.n_heads].values.empty()) {
          os << ",\"values\":[";
          for (uint32_t h = 0; h < s.n_heads; ++h) {
            const auto& v = p.cells[li * per + (n - hash::kMinOrder) * s.n_heads + h].values;
            os << (h ? "," : "") << "[";
            for (size_t k = 0; k < v.size(); ++k) {
              // JSON has no Inf/NaN: a non-finite stored value (verify reports it) is null.
              char b[32] = "null";
              if (std::isfinite(v[k]))
                std::snprintf(b, sizeof b, "%.9g", static_cast<double>(v[k]));
              os << (k ? "," : "") << b;
            }
            os << "]";
          }
          os << "]";
        }
        os << "}";
      }
      os << "]}";
    }
    os << "]}";
  }
  os << "],\"lookups\":" << lookups << ",\"hits\":" << hits << ",\"misses\":" << lookups - hits;
  if (with_table) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6f", hit_rate());
    os << ",\"engram_hit_rate\":" << b;
  } else {
    os << ",\"engram_hit_rate\":null";
  }
  os << ",\"bypass\":" << (bypass ? "true" : "false") << ",\"notes\":[";
  for (size_t i = 0; i < notes.size(); ++i) os << (i ? "," : "") << base::JsonString(notes[i]);
  os << "]}";
  return os.str();
}

}  // namespace engram::table

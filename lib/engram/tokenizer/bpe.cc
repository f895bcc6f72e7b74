// BPE: vocabulary, merge table and the heap-based merge loop.
#include "engram/tokenizer/bpe.h"

#include <cstdio>
#include <queue>

#include "engram/base/error.h"
#include "engram/tokenizer/unicode.h"

namespace engram::tokenizer {

using base::Json;

BpeModel::BpeModel(const Json& m, std::string_view what) {
  const Json* vocab = m.Find("vocab");
  ENGRAM_CHECK(vocab && vocab->is_object(), Code::kCorrupt,
               what << ": model.vocab must be an object");
  uint32_t max_id = 0;
  for (const auto& [tok, idj] : vocab->members()) {
    auto id = idj.as_uint64();
    ENGRAM_CHECK(id && *id < (1u << 31), Code::kCorrupt,
                 what << ": model.vocab[\"" << tok << "\"] is not a valid id");
    vocab_[tok] = static_cast<uint32_t>(*id);
    max_id = std::max(max_id, static_cast<uint32_t>(*id));
  }
  // Ids index arrays, so a hostile file must not make one sparse id allocate gigabytes: real
  // vocabularies are dense (added tokens may sit in a gap, never more than kMaxIdGap wide).
  ENGRAM_CHECK(max_id < vocab->members().size() + kMaxIdGap, Code::kCorrupt,
               what << ": model.vocab has " << vocab->members().size() << " tokens but an id of "
                    << max_id << "; ids must be dense (at most " << kMaxIdGap << " unused)");
  id_to_token_.resize(vocab->members().empty() ? 0 : max_id + 1);
  has_token_.assign(id_to_token_.size(), false);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[id] = tok;
    has_token_[id] = true;
  }
  if (const Json* d = m.Find("dropout"); d && d->is_number() && d->as_double() > 0)
    ENGRAM_THROW(Code::kInvalidArgument,
                 what << ": BPE dropout " << d->as_double()
                      << " makes encoding random; set \"dropout\": null for inference");
  if (const Json* u = m.Find("unk_token"); u && u->is_string()) {
    auto it = vocab_.find(u->as_string());
    ENGRAM_CHECK(it != vocab_.end(), Code::kCorrupt,
                 what << ": unk_token \"" << u->as_string() << "\" is not in the vocabulary");
    unk_id_ = it->second;
  }
  if (const Json* v = m.Find("fuse_unk"); v && v->is_bool()) fuse_unk_ = v->as_bool();
  if (const Json* v = m.Find("byte_fallback"); v && v->is_bool()) byte_fallback_ = v->as_bool();
  if (const Json* v = m.Find("ignore_merges"); v && v->is_bool()) ignore_merges_ = v->as_bool();
  if (const Json* v = m.Find("continuing_subword_prefix"); v && v->is_string())
    prefix_ = v->as_string();
  if (const Json* v = m.Find("end_of_word_suffix"); v && v->is_string()) suffix_ = v->as_string();

  const Json* merges = m.Find("merges");
  ENGRAM_CHECK(merges && merges->is_array(), Code::kCorrupt,
               what << ": model.merges must be an array");
  merges_.reserve(merges->items().size() * 2);
  uint32_t rank = 0;
  for (const Json& mj : merges->items()) {
    std::string a, b;
    if (mj.is_string()) {
      const std::string& s = mj.as_string();
      size_t sp = s.find(' ');
      ENGRAM_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                   Code::kCorrupt,
                   what << ": merge " << rank << " \"" << s
                        << "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.items().size() == 2 && mj.items()[0].is_string() &&
               mj.items()[1].is_string()) {
      a = mj.items()[0].as_string();
      b = mj.items()[1].as_string();
    } else {
      ENGRAM_THROW(Code::kCorrupt,
                   what << ": merge " << rank << " must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    ENGRAM_CHECK(ia != vocab_.end() && ib != vocab_.end(), Code::kCorrupt,
                 what << ": merge " << rank << " uses a token missing from the vocabulary");
    std::string merged = a + (b.rfind(prefix_, 0) == 0 ? b.substr(prefix_.size()) : b);
    auto in = vocab_.find(merged);
    ENGRAM_CHECK(in != vocab_.end(), Code::kCorrupt,
                 what << ": merge " << rank << " produces \"" << merged
                      << "\", which is not in the vocabulary");
    uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | ib->second;
    merges_.emplace(key, MergeValue{rank, in->second});  // first occurrence keeps its rank
    ++rank;
  }
}

std::optional<uint32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(uint32_t id) const {
  if (id >= id_to_token_.size() || !has_token_[id]) return nullptr;
  return &id_to_token_[id];
}

namespace {
struct Symbol {
  uint32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes; 0 = removed
};
struct Candidate {
  uint32_t rank;
  uint32_t pos;
  uint32_t new_id;
  bool operator<(const Candidate& o) const {  // priority_queue pops the largest: invert
    if (rank != o.rank) return rank > o.rank;
    return pos > o.pos;
  }
};
}  // namespace

void BpeModel::Tokenize(std::string_view word, std::vector<uint32_t>* out,
                        std::unordered_map<std::string, std::vector<uint32_t>>* cache) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (cache) {
    auto it = cache->find(std::string(word));
    if (it != cache->end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  size_t i = 0;
  std::string key;
  while (i < word.size()) {
    size_t start = i;
    NextCodePoint(word, &i);
    key.assign(word.substr(start, i - start));
    if (!prefix_.empty() && start > 0) key = prefix_ + key;
    if (!suffix_.empty() && i == word.size()) key += suffix_;
    auto it = vocab_.find(key);
    uint32_t len = static_cast<uint32_t>(i - start);
    auto push = [&](uint32_t id) {
      syms.push_back({id, static_cast<int32_t>(syms.size()) - 1, -1, len});
    };
    if (it != vocab_.end()) {
      push(it->second);
      continue;
    }
    if (byte_fallback_) {
      std::vector<uint32_t> ids;
      bool all = true;
      for (size_t k = start; k < i; ++k) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(word[k]));
        auto b = vocab_.find(buf);
        if (b == vocab_.end()) {
          all = false;
          break;
        }
        ids.push_back(b->second);
      }
      if (all) {
        for (uint32_t id : ids) syms.push_back({id, static_cast<int32_t>(syms.size()) - 1, -1, 1});
        continue;
      }
    }
    if (unk_id_) {
      if (fuse_unk_ && !syms.empty() && syms.back().id == *unk_id_) {
        syms.back().len += len;
      } else {
        push(*unk_id_);
      }
    }
    // Without unk the character is dropped, as HF does.
  }
  for (size_t k = 0; k < syms.size(); ++k) {
    syms[k].prev = static_cast<int32_t>(k) - 1;
    syms[k].next = k + 1 < syms.size() ? static_cast<int32_t>(k + 1) : -1;
  }
  std::priority_queue<Candidate> queue;
  auto lookup = [&](uint32_t a, uint32_t b) -> const MergeValue* {
    auto it = merges_.find((static_cast<uint64_t>(a) << 32) | b);
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t k = 0; k + 1 < syms.size(); ++k)
    if (const MergeValue* m = lookup(syms[k].id, syms[k + 1].id))
      queue.push({m->rank, static_cast<uint32_t>(k), m->new_id});
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& cur = syms[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const int32_t ri = cur.next;
    const MergeValue* m = lookup(cur.id, syms[ri].id);
    if (!m || m->new_id != top.new_id) continue;  // a stale queue entry
    cur.id = top.new_id;
    cur.len += syms[ri].len;
    cur.next = syms[ri].next;
    syms[ri].len = 0;
    if (cur.next >= 0) syms[cur.next].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0)
      if (const MergeValue* pm = lookup(syms[cur.prev].id, cur.id))
        queue.push({pm->rank, static_cast<uint32_t>(cur.prev), pm->new_id});
    if (cur.next >= 0)
      if (const MergeValue* nm = lookup(cur.id, syms[cur.next].id))
        queue.push({nm->rank, top.pos, nm->new_id});
  }
  std::vector<uint32_t> ids;
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) ids.push_back(syms[k].id);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cache && cache->size() < 200000) cache->emplace(std::string(word), std::move(ids));
}

}  // namespace engram::tokenizer

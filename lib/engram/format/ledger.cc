// Fact payload and FACTS section codecs (schemas/table_format.md §3.7, §5.7).
#include "engram/format/ledger.h"

#include <cstring>

#include "engram/base/endian.h"
#include "engram/base/error.h"

namespace engram::format {

namespace {

constexpr uint32_t kFactVersion = 1;
constexpr uint32_t kFlagFitted = 1u << 0;
constexpr uint32_t kFlagText = 1u << 1;
constexpr uint32_t kFlagSubject = 1u << 2;
constexpr uint32_t kMaxPrompts = 64;
constexpr uint32_t kMaxIds = 1u << 16;  // tokens of one phrasing or target
constexpr uint32_t kMaxTextBytes = 1u << 20;

// Bounds-checked little-endian reads over a payload.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  T Get(const char* what) {
    Need(sizeof(T), what);
    T v = base::LoadLE<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> Bytes(size_t n, const char* what) {
    Need(n, what);
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  void Align(size_t a) {
    size_t to = (pos_ + a - 1) / a * a;
    Need(to - pos_, "padding");
    for (; pos_ < to; ++pos_)
      ENGRAM_CHECK(b_[pos_] == 0, Code::kCorrupt, "fact record: non-zero padding");
  }
  size_t pos() const noexcept { return pos_; }
  size_t size() const noexcept { return b_.size(); }

 private:
  void Need(size_t n, const char* what) {
    ENGRAM_CHECK(n <= b_.size() - pos_, Code::kCorrupt,
                 "fact record: " << what << " runs past the end of its " << b_.size() << " bytes");
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

void PutIds(base::ByteWriter& w, const std::vector<uint32_t>& ids) {
  for (uint32_t id : ids) w.Put<uint32_t>(id);
}

std::vector<uint32_t> GetIds(Cursor& c, uint32_t n) {
  std::vector<uint32_t> ids(n);
  for (auto& id : ids) id = c.Get<uint32_t>("token ids");
  return ids;
}

std::string GetText(Cursor& c, uint32_t n) {
  auto b = c.Bytes(n, "text");
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

std::basic_string<uint8_t> EncodeFact(const Fact& f) {
  base::ByteWriter w;
  w.Put<uint32_t>(kFactVersion);
  w.Put<uint32_t>((f.fitted ? kFlagFitted : 0) | (f.text_entry ? kFlagText : 0) |
                  (f.subject_rows ? kFlagSubject : 0));
  w.Put<uint64_t>(f.id);
  w.Put<uint64_t>(f.created_unix);
  uint32_t margin_bits;
  std::memcpy(&margin_bits, &f.margin, 4);
  w.Put<uint32_t>(margin_bits);
  w.Put<uint32_t>(static_cast<uint32_t>(f.prompts.size()));
  w.Put<uint32_t>(static_cast<uint32_t>(f.target_ids.size()));
  w.Put<uint32_t>(static_cast<uint32_t>(f.target.size()));
  w.Put<uint64_t>(f.rows.size());
  for (const FactPrompt& p : f.prompts) {
    w.Put<uint32_t>(static_cast<uint32_t>(p.ids.size()));
    w.Put<uint32_t>(static_cast<uint32_t>(p.text.size()));
    PutIds(w, p.ids);
    w.PutBytes(p.text.data(), p.text.size());
    w.PadTo(4);
  }
  PutIds(w, f.target_ids);
  w.PutBytes(f.target.data(), f.target.size());
  w.PadTo(8);
  for (uint64_t r : f.rows) w.Put<uint64_t>(r);
  return w.bytes();
}

Fact DecodeFact(std::span<const uint8_t> payload, uint64_t total_rows) {
  Cursor c(payload);
  const uint32_t version = c.Get<uint32_t>("version");
  ENGRAM_CHECK(version == kFactVersion, Code::kCorrupt,
               "fact record: payload version " << version << ", this build reads " << kFactVersion);
  const uint32_t flags = c.Get<uint32_t>("flags");
  ENGRAM_CHECK((flags & ~(kFlagFitted | kFlagText | kFlagSubject)) == 0, Code::kCorrupt,
               "fact record: unknown flags " << flags);
  Fact f;
  f.fitted = flags & kFlagFitted;
  f.text_entry = flags & kFlagText;
  f.subject_rows = flags & kFlagSubject;
  f.id = c.Get<uint64_t>("id");
  f.created_unix = c.Get<uint64_t>("created_unix");
  const uint32_t margin_bits = c.Get<uint32_t>("margin");
  std::memcpy(&f.margin, &margin_bits, 4);
  const uint32_t n_prompts = c.Get<uint32_t>("n_prompts");
  const uint32_t n_target = c.Get<uint32_t>("n_target_ids");
  const uint32_t target_bytes = c.Get<uint32_t>("target_bytes");
  const uint64_t n_rows = c.Get<uint64_t>("n_rows");
  ENGRAM_CHECK(n_prompts >= 1 && n_prompts <= kMaxPrompts && n_target >= 1 && n_target <= kMaxIds &&
                   target_bytes <= kMaxTextBytes && n_rows <= payload.size() / 8,
               Code::kCorrupt,
               "fact record: implausible counts (" << n_prompts << " phrasings, " << n_target
                                                   << " target tokens, " << n_rows << " rows)");
  for (uint32_t i = 0; i < n_prompts; ++i) {
    FactPrompt p;
    const uint32_t n_ids = c.Get<uint32_t>("prompt n_ids");
    const uint32_t n_bytes = c.Get<uint32_t>("prompt bytes");
    ENGRAM_CHECK(n_ids >= 1 && n_ids <= kMaxIds && n_bytes <= kMaxTextBytes, Code::kCorrupt,
                 "fact record: a phrasing of " << n_ids << " tokens, " << n_bytes << " bytes");
    p.ids = GetIds(c, n_ids);
    p.text = GetText(c, n_bytes);
    c.Align(4);
    f.prompts.push_back(std::move(p));
  }
  f.target_ids = GetIds(c, n_target);
  f.target = GetText(c, target_bytes);
  c.Align(8);
  f.rows.resize(n_rows);
  for (auto& r : f.rows) {
    r = c.Get<uint64_t>("rows");
    ENGRAM_CHECK(r < total_rows, Code::kCorrupt,
                 "fact record: row " << r << " is outside the table's " << total_rows << " rows");
  }
  ENGRAM_CHECK(c.pos() == c.size(), Code::kCorrupt,
               "fact record: " << c.size() - c.pos() << " bytes after its last field");
  return f;
}

std::basic_string<uint8_t> EncodeFactsSection(const std::vector<Fact>& facts) {
  base::ByteWriter w;
  w.Put<uint64_t>(facts.size());
  for (const Fact& f : facts) {
    const auto p = EncodeFact(f);
    w.Put<uint32_t>(static_cast<uint32_t>(p.size()));
    w.Put<uint32_t>(0);
    w.PutBytes(p.data(), p.size());
    w.PadTo(8);
  }
  return w.bytes();
}

std::vector<Fact> DecodeFactsSection(std::span<const uint8_t> bytes, uint64_t total_rows) {
  Cursor c(bytes);
  const uint64_t n = c.Get<uint64_t>("FACTS count");
  ENGRAM_CHECK(n <= bytes.size() / 16, Code::kCorrupt,
               "FACTS: " << n << " facts cannot fit in " << bytes.size() << " bytes");
  std::vector<Fact> facts;
  facts.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t size = c.Get<uint32_t>("FACTS element size");
    ENGRAM_CHECK(c.Get<uint32_t>("FACTS reserved") == 0, Code::kCorrupt,
                 "FACTS: non-zero reserved field of fact " << i);
    facts.push_back(DecodeFact(c.Bytes(size, "FACTS element"), total_rows));
    c.Align(8);
  }
  ENGRAM_CHECK(c.pos() == c.size(), Code::kCorrupt,
               "FACTS: " << c.size() - c.pos() << " bytes after the last fact");
  return facts;
}

}  // namespace engram::format

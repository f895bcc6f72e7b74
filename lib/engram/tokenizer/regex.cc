// PCRE2 compile/JIT/match with per-thread match data.
#include "engram/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <mutex>

#include "engram/base/error.h"

namespace engram::tokenizer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(std::string_view pattern, std::string_view what)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE erroff = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &err,
                              &erroff, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    ENGRAM_THROW(Code::kCorrupt, what << ": regex /" << pattern << "/ does not compile at offset "
                                      << erroff << ": " << reinterpret_cast<char*>(buf));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

namespace {
struct MatchData {
  pcre2_match_data* md = nullptr;
  ~MatchData() {
    if (md) pcre2_match_data_free(md);
  }
};
}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view s) const {
  thread_local MatchData tl;
  if (!tl.md) tl.md = pcre2_match_data_create(4, nullptr);
  std::vector<std::pair<size_t, size_t>> out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                                          tl.md, nullptr)
                        : pcre2_match(impl_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                                      tl.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    ENGRAM_CHECK(rc >= 0, Code::kInternal, "regex match failed with code " << rc);
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tl.md);
    size_t start = ov[0], end = ov[1];
    if (end == start) {
      // An empty match: Oniguruma's iterator reports it and moves one character on.
      out.emplace_back(start, end);
      if (start >= s.size()) break;
      size_t next = start + 1;
      while (next < s.size() && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80) ++next;
      pos = next;
      continue;
    }
    out.emplace_back(start, end);
    pos = end;
  }
  return out;
}

std::string EscapeRegex(std::string_view literal) {
  std::string out = "\\Q";
  size_t i = 0;
  while (i < literal.size()) {
    size_t e = literal.find("\\E", i);
    if (e == std::string_view::npos) {
      out.append(literal.substr(i));
      break;
    }
    out.append(literal.substr(i, e - i));
    out.append("\\E\\\\E\\Q");
    i = e + 2;
  }
  out.append("\\E");
  return out;
}

}  // namespace engram::tokenizer

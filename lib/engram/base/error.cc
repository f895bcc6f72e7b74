// Error construction and the out-of-line throw helpers behind ENGRAM_CHECK.
#include "engram/base/error.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace engram {

std::string_view CodeName(Code code) noexcept {
  switch (code) {
    case Code::kIo:
      return "io";
    case Code::kCorrupt:
      return "corrupt";
    case Code::kVersion:
      return "version";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kConfig:
      return "config";
    case Code::kCuda:
      return "cuda";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

Error::Error(Code code, std::string message, std::string where)
    : std::runtime_error(std::move(message)), code_(code), where_(std::move(where)) {}

namespace base::detail {

void Throw(Code code, const std::string& message, const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  std::string where = std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
  throw Error(code, message, std::move(where));
}

}  // namespace base::detail

namespace base {
size_t LineProblems::DistinctLines() {
  std::stable_sort(problems_.begin(), problems_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t n = 0;
  for (size_t i = 0; i < problems_.size(); ++i)
    n += i == 0 || problems_[i].first != problems_[i - 1].first;
  return n;
}

void LineProblems::Throw(const std::string& head) const {
  constexpr size_t kMaxListed = 25;
  std::ostringstream os;
  os << head << "; nothing was written:";
  for (size_t i = 0; i < problems_.size() && i < kMaxListed; ++i)
    os << "\n" << file_ << ":" << problems_[i].first << ": " << problems_[i].second;
  if (problems_.size() > kMaxListed) os << "\n... and " << problems_.size() - kMaxListed << " more";
  ENGRAM_THROW(Code::kInvalidArgument, os.str());
}

void CrashPoint(const char* point) noexcept {
  static const char* at = std::getenv("ENGRAM_CRASH_AT");
  if (at && std::strcmp(at, point) == 0) std::raise(SIGKILL);
}
}  // namespace base

namespace base::detail {

void DcheckFail(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "engram: internal check failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace base::detail
}  // namespace engram

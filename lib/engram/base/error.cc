// Error construction and the out-of-line throw helpers behind ENGRAM_CHECK.
#include "engram/base/error.h"

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

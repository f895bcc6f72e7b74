// ThrowIfFailed: a module's status back into an engram::Error.
#include "engram/base/module_status.h"

namespace engram::base {

void ThrowIfFailed(int status, const std::string& error) {
  if (status == 0) return;
  const int code = status - 1;
  if (code < 0 || code > static_cast<int>(Code::kInternal))
    throw Error(Code::kInternal,
                "a module returned status " + std::to_string(status) + ": " + error);
  throw Error(static_cast<Code>(code), error);
}

}  // namespace engram::base

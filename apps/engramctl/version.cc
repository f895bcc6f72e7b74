// `engramctl --version`: its own object library (apps/CMakeLists.txt), the one file that sees the
// commit hash, so that a new commit recompiles this file alone.
#include <string>

#include "cli_common.h"

namespace engramctl {

std::string VersionText() {
  std::string parts;
#ifdef ENGRAM_HAVE_TORCH
  parts += " torch";
#endif
#ifdef ENGRAM_HAVE_CUDA
  parts += " cuda";
#endif
  return std::string("engramctl ") + ENGRAM_VERSION + " (commit " + ENGRAM_GIT_COMMIT +
         ")\noptional parts compiled in:" + (parts.empty() ? std::string(" none") : parts);
}

}  // namespace engramctl

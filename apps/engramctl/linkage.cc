// Which link of engramctl this is. apps/CMakeLists.txt compiles this file into each executable it
// links from the same objects: bin/engramctl (statically, ENGRAM_STATIC_EXE) and, beside it,
// lib/engramctl-shared (dynamically, for the commands that load modules; see main.cc).
#include "cli_common.h"

namespace engramctl {

bool LinkedStatically() {
#ifdef ENGRAM_STATIC_EXE
  return true;
#else
  return false;
#endif
}

}  // namespace engramctl

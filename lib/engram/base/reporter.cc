// The shared silent Reporter.
#include "engram/base/reporter.h"

namespace engram::base {

Reporter& Silent() {
  static NullReporter r;
  return r;
}

}  // namespace engram::base

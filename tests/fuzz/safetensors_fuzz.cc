// Fuzz target: safetensors headers and files.
#include "engram/base/error.h"
#include "engram/format/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  engram::fuzz::MemFile f(data, size);
  try {
    auto s = engram::format::SafetensorsFile::Open(f.path());
    for (const auto& t : s->tensors()) {
      auto d = s->Data(t);
      if (!d.empty()) {
        volatile uint8_t x = d[d.size() - 1];  // the last byte must be inside the file
        (void)x;
      }
    }
  } catch (const engram::Error&) {
  }
  return 0;
}

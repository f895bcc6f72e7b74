// Fuzz target: the CLI's size, shard and list parsers.
#include <string>

#include "engram/base/error.h"
#include "engram/base/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  try {
    engram::base::ParseSize(s, "--memory", 'K');
  } catch (const engram::Error&) {
  }
  try {
    engram::base::ParseSize(s, "--buckets");
  } catch (const engram::Error&) {
  }
  try {
    uint32_t i, n;
    engram::base::ParseShard(s, &i, &n);
  } catch (const engram::Error&) {
  }
  return 0;
}

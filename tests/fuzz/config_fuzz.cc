// Fuzz target: config.toml text.
#include <string>

#include "engram/base/error.h"
#include "engram/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto c = engram::config::Parse(
        text, "fuzz.toml",
        [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
    engram::config::LayoutProblems(c);
    engram::config::ToToml(c);
  } catch (const engram::Error&) {
  }
  return 0;
}

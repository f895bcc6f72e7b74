// Fuzz target: tokenizer.json text; a loaded tokenizer must also encode and decode safely.
#include <string>

#include "engram/base/error.h"
#include "engram/tokenizer/canonical.h"
#include "engram/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto t = engram::tokenizer::Tokenizer::FromJson(text, "fuzz.json");
    auto ids = t->Encode("Hello world, 你好 \xF0\x9F\x98\x80 <|pad|> 123\n\n", true);
    t->Decode(ids, false);
    if (t->vocab_size() < 5000) engram::tokenizer::BuildCanonicalMap(*t);
  } catch (const engram::Error&) {
  }
  return 0;
}

// The tokenizer (engram::tokenizer) on the small GPT-2-style tokenizer of tests/data: byte-level
// BPE merges, decoding, added tokens, invalid UTF-8, and the canonical-id compression (DESIGN §2).
// Parity with Hugging Face tokenizers on real text is tests/tokenizer_parity.
#include "engram/tokenizer/tokenizer.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engram/tokenizer/canonical.h"

using namespace engram::tokenizer;

namespace {

const Tokenizer& Tiny() {
  static const auto t = Tokenizer::Load(ENGRAM_SOURCE_DIR "/tests/data/tiny_tokenizer.json");
  return *t;
}

}  // namespace

TEST_CASE("byte-level BPE applies the merges and decodes back to the text") {
  const Tokenizer& t = Tiny();
  const std::vector<uint32_t> ids = t.Encode(" the and of");
  // " the", " and", " of" are single tokens of the vocabulary (merges Ġt+he, Ġan+d, Ġo+f).
  REQUIRE(ids.size() == 3);
  CHECK(t.IdToToken(ids[0]) == "Ġthe");
  CHECK(t.IdToToken(ids[1]) == "Ġand");
  CHECK(t.IdToToken(ids[2]) == "Ġof");
  for (const char* text : {" the and of", " Where is it? 42!", " tab\tand\nnewline", ""})
    CHECK(t.Decode(t.Encode(text)) == text);
  // Its ByteLevel pre-tokenizer adds a prefix space (add_prefix_space), as Hugging Face's does.
  CHECK(t.Decode(t.Encode("Where")) == " Where");
}

TEST_CASE("added tokens are matched before BPE; special ones can be skipped when decoding") {
  const Tokenizer& t = Tiny();
  const std::vector<uint32_t> ids = t.Encode("<|bos|>the");
  REQUIRE(!ids.empty());
  CHECK(ids[0] == 286);
  CHECK(t.IsSpecial(286));
  CHECK(t.Decode(ids) == "<|bos|> the");
  CHECK(t.Decode(ids, /*skip_special_tokens=*/true) == " the");
  CHECK(t.vocab_size() == 288);
}

TEST_CASE("invalid UTF-8 is replaced by U+FFFD before tokenizing, and counted") {
  const Tokenizer& t = Tiny();
  Encoder enc(t);
  size_t replaced = 0;
  const std::vector<uint32_t> ids = enc.Encode(
      "a\xff"
      "b\xe6",
      false, &replaced);
  CHECK(replaced == 2);
  CHECK(t.Decode(ids) ==
        " a\xEF\xBF\xBD"
        "b\xEF\xBF\xBD");
}

TEST_CASE("canonical keys: NFKC, accents stripped, lowercase, whitespace collapsed") {
  CHECK(CanonicalKey("The") == "the");
  CHECK(CanonicalKey(" Café") == "cafe");
  CHECK(CanonicalKey("\xEF\xBC\xA1") == "a");  // fullwidth A, NFKC
  CHECK(CanonicalKey("a \t\n b") == "a b");
  CHECK(CanonicalKey(" ") == " ");  // a token that is exactly one space keeps it
  CHECK(CanonicalKey("  x  ") == "x");
}

TEST_CASE("the canonical map merges tokens with one key, in first-seen order over ids") {
  const Tokenizer& t = Tiny();
  const CanonicalMap m = BuildCanonicalMap(t);
  REQUIRE(m.map.size() == t.vocab_size());
  CHECK(m.canonical_vocab < t.vocab_size());
  // First-seen order: id 0 gets canonical 0, and each canonical id first appears in order.
  uint32_t next = 0;
  for (uint32_t c : m.map) {
    REQUIRE(c <= next);
    if (c == next) ++next;
  }
  CHECK(next == m.canonical_vocab);
  // " a" (Ġa) and "a" normalise to one key ("a"), and so does "A".
  const uint32_t space_a = *t.TokenToId("Ġa"), a = *t.TokenToId("a");
  CHECK(m.map[space_a] == m.map[a]);
  const uint32_t upper_a = *t.TokenToId("A");
  CHECK(m.map[upper_a] == m.map[a]);
  CHECK(m.map[*t.TokenToId("b")] != m.map[a]);
}

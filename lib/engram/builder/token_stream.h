// Streams a build's corpus as blocks of canonical ids with kDocSeparator between documents:
// u32 token files read in fixed-size blocks, or UTF-8 text tokenized in parallel batches.
// Nothing reads a whole input into memory (except a --doc-per-file document).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/format/layout.h"
#include "engram/hash/addressing.h"

namespace engram::builder {

// Document separator inside u32 token files (schemas/cli.md, "token files").
inline constexpr uint32_t kDocSeparator = 0xFFFFFFFFu;

struct TokenStreamOptions {
  std::vector<std::string> token_files;
  std::vector<std::string> corpus_files;
  std::string tokenizer_path;  // required for corpus_files
  bool doc_per_file = false;
  bool ids_are_canonical = false;  // token files already hold canonical ids
  int threads = 0;
  // Shard I of N reads only its contiguous slice of the input, about 1/N of it: u32 token files
  // are cut at id positions I*T/N (T = ids in all files, in order; a cut inside a document
  // carries the document's preceding ids as context, so counts do not depend on the cut); text
  // corpora are cut at byte positions I*B/N, rounded to the next document (line or file) start.
  uint32_t shard_index = 0, shard_count = 1;
  // Ids per block of a u32 file (text: bytes per tokenized batch / 4). Only the granularity of
  // parallel work and shards; results do not depend on it.
  size_t block_ids = 1u << 22;
};

struct TokenStreamStats {
  uint64_t tokens = 0;  // ids delivered (separators excluded)
  uint64_t documents = 0;
  uint64_t input_bytes = 0;  // total size of the inputs
  uint64_t replaced_utf8 = 0;
  // This shard's slice of the input: [range_begin, range_end) of range_total token ids (u32
  // files) or bytes (text corpora; document starts inside the slice).
  uint64_t range_begin = 0, range_end = 0, range_total = 0;
  bool range_in_bytes = false;
};

// [begin, end) of shard `index` of `count` over `total` units: floor(i * total / count).
std::pair<uint64_t, uint64_t> ShardSlice(uint64_t total, uint32_t index, uint32_t count);

// Total input size, for progress/ETA (0 when unknown).
uint64_t InputBytes(const TokenStreamOptions& o);

// A block of canonical ids: documents separated by kDocSeparator (the last one terminated too,
// unless it continues in the next block). `context` holds up to max_order - 1 ids that precede
// the block inside the same document (empty when the block starts a document), so every block can
// be processed on its own, in any order, by any thread or shard.
struct TokenBlock {
  uint64_t index = 0;  // position in this shard's stream
  std::span<const uint32_t> context;
  std::span<const uint32_t> ids;
};

// Calls sink(block) for this shard's blocks in input order. Block boundaries depend only on the
// input, never on threads or shards. Throws kCorrupt naming the file and offset for ids outside
// the vocabulary.
TokenStreamStats StreamTokens(const TokenStreamOptions& o, const format::Layout& layout,
                              const std::function<void(const TokenBlock&)>& sink,
                              base::Reporter& reporter);

// Feeds a block's n-grams (orders 2..N) to f(order, ids), with the block's context as history:
// the window a position reads, padded with the pad id at a document's start.
template <typename F>
void ForEachNgram(const hash::AddressSpec& spec, const TokenBlock& b, F&& f) {
  const uint32_t N = spec.max_order;
  uint32_t w[hash::kMaxOrder];
  std::fill(w, w + N, spec.pad_id);
  size_t c = b.context.size();
  for (size_t i = 0; i < c; ++i) w[N - c + i] = b.context[i];
  for (uint32_t id : b.ids) {
    if (id == kDocSeparator) {
      std::fill(w, w + N, spec.pad_id);
      continue;
    }
    std::memmove(w, w + 1, (N - 1) * 4);
    w[N - 1] = id;
    for (uint32_t n = hash::kMinOrder; n <= N; ++n) f(n, w + N - n);
  }
}

}  // namespace engram::builder

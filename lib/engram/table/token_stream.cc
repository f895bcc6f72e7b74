// Corpus readers for build: u32 token files and text files.
#include "engram/table/token_stream.h"

#include <fcntl.h>
#include <omp.h>

#include <exception>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/table/build.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::table {

uint64_t InputBytes(const TokenStreamOptions& o) {
  uint64_t total = 0;
  for (const auto* list : {&o.token_files, &o.corpus_files})
    for (const auto& f : *list) {
      base::UniqueFd fd = base::OpenFile(f, O_RDONLY);
      total += base::RegularFileSize(fd.get(), f);
    }
  return total;
}

TokenStreamStats StreamTokens(const TokenStreamOptions& o, const Layout& layout,
                              const std::function<void(const TokenBlock&)>& sink,
                              base::Reporter& reporter) {
  TokenStreamStats st;
  st.input_bytes = InputBytes(o);
  uint64_t bytes_done = 0;
  uint64_t block_index = 0;
  const size_t ctx_len = layout.spec.max_order - 1;
  std::vector<uint32_t> context;  // the tail of the previous block's unfinished document
  auto mine = [&](uint64_t index) { return index % o.shard_count == o.shard_index; };
  auto deliver = [&](std::span<const uint32_t> b) {
    TokenBlock blk;
    blk.index = block_index++;
    blk.context = context;
    blk.ids = b;
    if (mine(blk.index)) {
      for (uint32_t id : b) {
        if (id == kDocSeparator)
          st.documents++;
        else
          st.tokens++;
      }
      sink(blk);
    }
    // The next block continues this block's last document unless it ended with a separator.
    if (!b.empty() && b.back() != kDocSeparator) {
      std::vector<uint32_t> next;
      size_t start = b.size();
      while (start > 0 && b[start - 1] != kDocSeparator && b.size() - start < ctx_len) --start;
      if (start == 0 && b.size() < ctx_len)  // the document began before this block
        next.assign(context.end() - std::min(context.size(), ctx_len - b.size()), context.end());
      next.insert(next.end(), b.begin() + start, b.end());
      context = std::move(next);
    } else {
      context.clear();
    }
  };
  const bool map_ids = !layout.canon_map.empty() && !o.ids_are_canonical;
  const uint32_t limit =
      map_ids ? static_cast<uint32_t>(layout.canon_map.size()) : layout.spec.canonical_vocab;
  std::vector<uint32_t> buf;
  for (const auto& path : o.token_files) {
    base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
    uint64_t size = base::RegularFileSize(fd.get(), path);
    ENGRAM_CHECK(
        size % 4 == 0, Code::kCorrupt,
        path << ": " << size << " bytes is not a whole number of u32 token ids (truncated file?)");
    uint64_t off = 0;
    std::vector<uint32_t> carry;  // the unfinished document at the end of a read
    bool any = false;
    while (off < size) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(o.block_ids, (size - off) / 4));
      buf.resize(carry.size() + n);
      std::copy(carry.begin(), carry.end(), buf.begin());
      base::PreadFull(fd.get(), buf.data() + carry.size(), n * 4, off, path);
      uint32_t* p = buf.data() + carry.size();
      for (size_t i = 0; i < n; ++i) {
        uint32_t id = p[i];
        if (id == kDocSeparator) continue;
        ENGRAM_CHECK(id < limit, Code::kCorrupt,
                     path << ": token id " << id << " at byte offset " << off + i * 4
                          << " is outside the " << (map_ids ? "tokenizer's " : "canonical ")
                          << "vocabulary of " << limit
                          << " ids; was the file made with another tokenizer?");
        if (map_ids) p[i] = layout.canon_map[id];
        any = true;
      }
      off += n * 4;
      bytes_done += n * 4;
      // Cut after the last separator so that blocks hold whole documents; a document longer than
      // a block is passed on in pieces.
      size_t cut = buf.size();
      while (cut > 0 && buf[cut - 1] != kDocSeparator) --cut;
      if (off >= size) cut = buf.size();
      if (cut == 0 && buf.size() >= o.block_ids) cut = buf.size();
      if (off >= size && (buf.empty() || buf.back() != kDocSeparator) && any) {
        buf.push_back(kDocSeparator);
        cut = buf.size();
      }
      carry.assign(buf.begin() + cut, buf.end());
      buf.resize(cut);
      if (!buf.empty()) deliver(buf);
      reporter.Progress("read tokens", bytes_done, st.input_bytes, "bytes");
    }
  }
  if (!o.corpus_files.empty()) {
    ENGRAM_CHECK(!o.tokenizer_path.empty(), Code::kInvalidArgument,
                 "--corpus needs a tokenizer: give --tokenizer tokenizer.json or [model] tokenizer "
                 "in the config");
    auto tok = tokenizer::Tokenizer::Load(o.tokenizer_path);
    int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
    std::vector<tokenizer::Encoder> encoders;
    for (int t = 0; t < threads; ++t) encoders.emplace_back(*tok);
    std::vector<std::string> docs;
    auto flush = [&] {
      if (docs.empty()) return;
      if (!mine(block_index)) {  // another shard's batch: skip without tokenizing
        docs.clear();
        ++block_index;
        return;
      }
      std::vector<std::vector<uint32_t>> out(docs.size());
      std::vector<size_t> replaced(docs.size(), 0);
      std::exception_ptr error;
      const int64_t nd = static_cast<int64_t>(docs.size());
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
      for (int64_t d = 0; d < nd; ++d) {
        try {
          encoders[omp_get_thread_num()].EncodeAppend(docs[d], &out[d], false, &replaced[d]);
        } catch (...) {
#pragma omp critical
          if (!error) error = std::current_exception();
        }
      }
      if (error) std::rethrow_exception(error);
      buf.clear();
      for (size_t d = 0; d < docs.size(); ++d) {
        st.replaced_utf8 += replaced[d];
        if (out[d].empty()) continue;
        for (uint32_t id : out[d]) {
          ENGRAM_CHECK(id < limit || !map_ids, Code::kInternal, "tokenizer produced id " << id);
          buf.push_back(map_ids ? layout.canon_map[id] : id);
        }
        buf.push_back(kDocSeparator);
      }
      docs.clear();
      if (!buf.empty()) deliver(buf);
    };
    for (const auto& path : o.corpus_files) {
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      uint64_t size = base::RegularFileSize(fd.get(), path);
      if (o.doc_per_file) {
        std::string text = base::ReadFileToString(path, 1ull << 32);
        docs.push_back(std::move(text));
        bytes_done += size;
        size_t pending = 0;
        for (auto& d : docs) pending += d.size();
        if (pending >= o.block_ids * 4) flush();
        reporter.Progress("tokenize", bytes_done, st.input_bytes, "bytes");
        continue;
      }
      std::string partial;
      std::vector<char> chunk(1 << 20);
      uint64_t off = 0;
      size_t pending = 0;
      while (off < size) {
        size_t got = base::PreadSome(fd.get(), chunk.data(), chunk.size(), off, path);
        if (got == 0) break;
        off += got;
        size_t start = 0;
        for (size_t i = 0; i < got; ++i) {
          if (chunk[i] != '\n') continue;
          partial.append(chunk.data() + start, i - start);
          if (!partial.empty() && partial.back() == '\r') partial.pop_back();
          pending += partial.size();
          if (!partial.empty()) docs.push_back(std::move(partial));
          partial.clear();
          start = i + 1;
        }
        partial.append(chunk.data() + start, got - start);
        bytes_done += got;
        if (pending >= o.block_ids * 4) {
          flush();
          pending = 0;
          reporter.Progress("tokenize", bytes_done, st.input_bytes, "bytes");
        }
      }
      if (!partial.empty()) docs.push_back(std::move(partial));
    }
    flush();
    reporter.Progress("tokenize", bytes_done, st.input_bytes, "bytes");
  }
  reporter.ProgressDone(o.corpus_files.empty() ? "read tokens" : "tokenize");
  return st;
}

}  // namespace engram::table

// Corpus readers for build: u32 token files and text files.
#include "engram/builder/token_stream.h"

#include <fcntl.h>
#include <omp.h>

#include <exception>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/builder/build.h"
#include "engram/tokenizer/tokenizer.h"

namespace engram::builder {

uint64_t InputBytes(const TokenStreamOptions& o) {
  uint64_t total = 0;
  for (const auto* list : {&o.token_files, &o.corpus_files})
    for (const auto& f : *list) {
      base::UniqueFd fd = base::OpenFile(f, O_RDONLY);
      total += base::RegularFileSize(fd.get(), f);
    }
  return total;
}

std::pair<uint64_t, uint64_t> ShardSlice(uint64_t total, uint32_t index, uint32_t count) {
  auto at = [&](uint64_t i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(total) * i / count);
  };
  return {at(index), at(index + 1ull)};
}

TokenStreamStats StreamTokens(const TokenStreamOptions& o, const format::Layout& layout,
                              const std::function<void(const TokenBlock&)>& sink,
                              base::Reporter& reporter) {
  TokenStreamStats st;
  st.input_bytes = InputBytes(o);
  uint64_t bytes_done = 0;
  uint64_t block_index = 0;
  const size_t ctx_len = layout.spec.max_order - 1;
  std::vector<uint32_t> context;  // the tail of the previous block's unfinished document
  auto deliver = [&](std::span<const uint32_t> b) {
    TokenBlock blk;
    blk.index = block_index++;
    blk.context = context;
    blk.ids = b;
    for (uint32_t id : b) {
      if (id == kDocSeparator)
        st.documents++;
      else
        st.tokens++;
    }
    sink(blk);
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
  // Checks and maps n ids read from `path` at byte offset `off`.
  auto check_map = [&](uint32_t* p, size_t n, const std::string& path, uint64_t off) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t id = p[i];
      if (id == kDocSeparator) continue;
      ENGRAM_CHECK(id < limit, Code::kCorrupt,
                   path << ": token id " << id << " at byte offset " << off + i * 4
                        << " is outside the " << (map_ids ? "tokenizer's " : "canonical ")
                        << "vocabulary of " << limit
                        << " ids; was the file made with another tokenizer?");
      if (map_ids) p[i] = layout.canon_map[id];
    }
  };
  std::vector<uint32_t> buf;
  if (!o.token_files.empty()) {
    std::vector<uint64_t> file_ids;
    uint64_t total_ids = 0;
    for (const auto& path : o.token_files) {
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      uint64_t size = base::RegularFileSize(fd.get(), path);
      ENGRAM_CHECK(size % 4 == 0, Code::kCorrupt,
                   path << ": " << size
                        << " bytes is not a whole number of u32 token ids (truncated file?)");
      file_ids.push_back(size / 4);
      total_ids += size / 4;
    }
    auto [lo, hi] = ShardSlice(total_ids, o.shard_index, o.shard_count);
    st.range_begin = lo;
    st.range_end = hi;
    st.range_total = total_ids;
    const uint64_t range_bytes = (hi - lo) * 4;
    uint64_t fstart = 0;
    for (size_t fi = 0; fi < o.token_files.size(); ++fi) {
      const std::string& path = o.token_files[fi];
      const uint64_t fend = fstart + file_ids[fi];
      const uint64_t a = std::max(lo, fstart), b = std::min(hi, fend);
      if (a >= b) {
        fstart = fend;
        continue;
      }
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      const uint64_t size = file_ids[fi] * 4;
      // A slice that starts inside a document takes that document's preceding ids as context.
      context.clear();
      if (a > fstart) {
        size_t k = static_cast<size_t>(std::min<uint64_t>(ctx_len, a - fstart));
        std::vector<uint32_t> before(k);
        const uint64_t at = (a - fstart - k) * 4;
        base::PreadFull(fd.get(), before.data(), k * 4, at, path);
        check_map(before.data(), k, path, at);
        size_t s = k;
        while (s > 0 && before[s - 1] != kDocSeparator) --s;
        context.assign(before.begin() + s, before.end());
      }
      uint64_t off = (a - fstart) * 4;
      const uint64_t end = (b - fstart) * 4;
      std::vector<uint32_t> carry;  // the unfinished document at the end of a read
      while (off < end) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(o.block_ids, (end - off) / 4));
        buf.resize(carry.size() + n);
        std::copy(carry.begin(), carry.end(), buf.begin());
        base::PreadFull(fd.get(), buf.data() + carry.size(), n * 4, off, path);
        check_map(buf.data() + carry.size(), n, path, off);
        off += n * 4;
        bytes_done += n * 4;
        // Cut after the last separator so that blocks hold whole documents; a document longer
        // than a block is passed on in pieces.
        size_t cut = buf.size();
        while (cut > 0 && buf[cut - 1] != kDocSeparator) --cut;
        if (off >= end) cut = buf.size();
        if (cut == 0 && buf.size() >= o.block_ids) cut = buf.size();
        // The file's last document is terminated even without a trailing separator.
        if (off >= size && !buf.empty() && buf.back() != kDocSeparator) {
          buf.push_back(kDocSeparator);
          cut = buf.size();
        }
        carry.assign(buf.begin() + cut, buf.end());
        buf.resize(cut);
        if (!buf.empty()) deliver(buf);
        reporter.Progress("read tokens", bytes_done, range_bytes, "bytes");
      }
      fstart = fend;
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
    std::vector<uint64_t> file_bytes;
    uint64_t total_bytes = 0;
    for (const auto& path : o.corpus_files) {
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      file_bytes.push_back(base::RegularFileSize(fd.get(), path));
      total_bytes += file_bytes.back();
    }
    auto [lo, hi] = ShardSlice(total_bytes, o.shard_index, o.shard_count);
    if (o.token_files.empty()) {
      st.range_begin = lo;
      st.range_end = hi;
      st.range_total = total_bytes;
      st.range_in_bytes = true;
    }
    const uint64_t range_bytes = hi - lo;
    uint64_t fstart = 0;
    for (size_t fi = 0; fi < o.corpus_files.size(); ++fi) {
      const std::string& path = o.corpus_files[fi];
      const uint64_t size = file_bytes[fi], fend = fstart + size;
      const uint64_t a = std::max(lo, fstart), b = std::min(hi, fend);
      const uint64_t file_start = fstart;
      fstart = fend;
      if (o.doc_per_file) {  // the file is one document: the shard whose slice holds its start
        if (file_start < lo || file_start >= hi) continue;
        std::string text = base::ReadFileToString(path, 1ull << 32);
        docs.push_back(std::move(text));
        bytes_done += size;
        size_t pending = 0;
        for (auto& d : docs) pending += d.size();
        if (pending >= o.block_ids * 4) flush();
        reporter.Progress("tokenize", bytes_done, std::max(bytes_done, range_bytes), "bytes");
        continue;
      }
      if (a >= b) continue;
      base::UniqueFd fd = base::OpenFile(path, O_RDONLY);
      // Lines that start in [s, e) are this shard's; a line that starts before s is skipped.
      const uint64_t s = a - file_start, e = b - file_start;
      bool skipping = false;
      if (s > 0) {
        char before = 0;
        base::PreadFull(fd.get(), &before, 1, s - 1, path);
        skipping = before != '\n';
      }
      std::string partial;
      std::vector<char> chunk(1 << 20);
      uint64_t off = s;
      size_t pending = 0;
      bool done = false;
      while (off < size && !done) {
        size_t got = base::PreadSome(fd.get(), chunk.data(), chunk.size(), off, path);
        if (got == 0) break;
        size_t start = 0;
        for (size_t i = 0; i < got; ++i) {
          if (chunk[i] != '\n') continue;
          if (!skipping) {
            partial.append(chunk.data() + start, i - start);
            if (!partial.empty() && partial.back() == '\r') partial.pop_back();
            pending += partial.size();
            if (!partial.empty()) docs.push_back(std::move(partial));
            partial.clear();
          }
          skipping = false;
          start = i + 1;
          if (off + start >= e) {  // the next line starts in the next shard's slice
            done = true;
            break;
          }
        }
        if (!done && !skipping) partial.append(chunk.data() + start, got - start);
        off += got;
        bytes_done += got;
        if (pending >= o.block_ids * 4) {
          flush();
          pending = 0;
          reporter.Progress("tokenize", bytes_done, std::max(bytes_done, range_bytes), "bytes");
        }
      }
      if (!done && !skipping && !partial.empty()) docs.push_back(std::move(partial));
    }
    flush();
    reporter.Progress("tokenize", bytes_done, bytes_done, "bytes");
  }
  reporter.ProgressDone(o.corpus_files.empty() ? "read tokens" : "tokenize");
  return st;
}

}  // namespace engram::builder

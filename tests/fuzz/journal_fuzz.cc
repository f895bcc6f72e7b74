// Fuzz target: a valid base (a golden table compiled into the corpus's first bytes is not
// needed: we build one in memory) followed by fuzz bytes as its journal.
#include <fcntl.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/format/journal.h"
#include "engram/format/reader.h"
#include "engram/format/writer.h"
#include "fuzz_util.h"

namespace {
const std::vector<uint8_t>& Base() {
  static const std::vector<uint8_t> base = [] {
    engram::hash::AddressSpec s;
    s.layer_ids = {1, 2};
    s.max_order = 3;
    s.n_heads = 2;
    s.canonical_vocab = 100;
    s.log2_buckets = 4;
    engram::format::Layout l = engram::format::MakeLayout(s, 32, engram::base::DType::kF8E4M3);
    char dir[] = "/tmp/engram_journal_fuzz_XXXXXX";
    std::string d = ::mkdtemp(dir);
    std::string p = d + "/base.engram";
    engram::format::WriterOptions o;
    o.chunk_log2 = 12;
    o.created_unix = 1767225600;  // fixed: journal seeds are checksummed against this header
    engram::format::TableWriter w(p, l, o);
    w.Commit(engram::base::Silent());
    std::string bytes = engram::base::ReadFileToString(p, 1 << 26);
    // scripts/make_fuzz_seeds.sh appends real journal records to this base.
    if (const char* out = std::getenv("ENGRAM_FUZZ_WRITE_BASE")) ::rename(p.c_str(), out);
    ::unlink(p.c_str());
    ::rmdir(d.c_str());
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }();
  return base;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> file = Base();
  file.insert(file.end(), data, data + size);
  engram::fuzz::MemFile f(file.data(), file.size());
  try {
    auto r = engram::format::Reader::Open(f.path());
    engram::base::UniqueFd fd = engram::base::OpenFile(f.path(), O_RDONLY);
    auto js =
        engram::format::ReadJournal(fd.get(), f.path(), r->header(), r->layout(), r->file_length());
    for (const auto& e : js.committed)
      if (e.row >= r->layout().total_rows) __builtin_trap();  // an entry outside the table
    engram::format::FindStrandedCommits(fd.get(), f.path(), r->header(), js.committed_end,
                                        r->file_length());
  } catch (const engram::Error&) {
  }
  return 0;
}

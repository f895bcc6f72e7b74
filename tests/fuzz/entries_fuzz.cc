// Fuzz target: append entry files (JSONL), validated against a small table with --dry-run
// semantics (nothing is written).
#include <cstring>
#include <string>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/format/writer.h"
#include "engram/table/append.h"
#include "fuzz_util.h"

namespace {
const std::string& TablePath() {
  static const std::string path = [] {
    engram::hash::AddressSpec s;
    s.layer_ids = {1, 3};
    s.max_order = 3;
    s.n_heads = 2;
    s.canonical_vocab = 50;
    s.log2_buckets = 3;
    engram::format::Layout l = engram::format::MakeLayout(s, 4, engram::base::DType::kF16);
    char dir[] = "/tmp/engram_entries_fuzz_XXXXXX";
    std::string p = std::string(::mkdtemp(dir)) + "/t.engram";
    engram::format::WriterOptions o;
    o.chunk_log2 = 12;
    engram::format::TableWriter w(p, l, o);
    w.Commit(engram::base::Silent());
    return p;
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  engram::fuzz::MemFile f(data, size);
  engram::table::AppendOptions o;
  o.table = TablePath();
  o.entries = f.path();
  o.dry_run = true;
  try {
    engram::table::Append(o, engram::base::Silent());
  } catch (const engram::Error&) {
  }
  return 0;
}

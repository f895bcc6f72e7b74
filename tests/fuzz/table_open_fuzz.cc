// Fuzz target: any bytes as a table file: Open, inspect-style reads, journal scan and Verify must
// either succeed or throw engram::Error, never crash, hang or allocate without bound.
#include <fcntl.h>

#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/base/reporter.h"
#include "engram/format/journal.h"
#include "engram/format/reader.h"
#include "engram/table/verify.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  engram::fuzz::MemFile f(data, size);
  try {
    auto r = engram::format::Reader::Open(f.path());
    const auto& l = r->layout();
    uint32_t tag = 0;
    for (uint64_t row = 0; row < l.total_rows && row < 64; ++row) tag ^= r->Tag(row);
    (void)tag;
    engram::base::UniqueFd fd = engram::base::OpenFile(f.path(), O_RDONLY);
    auto js = engram::format::ReadJournal(fd.get(), f.path(), r->header(), l, r->file_length());
    (void)r->Facts();
    engram::format::FindStrandedCommits(fd.get(), f.path(), r->header(), js.committed_end,
                                        r->file_length());
  } catch (const engram::Error&) {
  }
  try {
    engram::table::VerifyOptions o;
    o.threads = 1;
    engram::table::Verify(f.path(), o, engram::base::Silent());
  } catch (const engram::Error&) {
  }
  return 0;
}

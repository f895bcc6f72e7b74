// TableView: open + journal scan + the deterministic-addressing rule (schemas/table_format.md
// §5.4).
#include "engram/format/view.h"

#include <fcntl.h>

#include "engram/base/error.h"
#include "engram/base/file.h"

namespace engram::format {

std::string DeterministicAddressingError(const std::string& path, size_t entries) {
  return "deterministic addressing requires sorted bucket ids: " + path + " has " +
         std::to_string(entries) +
         " appended entries not yet folded into its base, so rows depend on the journal, not only "
         "on token ids; "
         "run 'engramctl sort-buckets " +
         path +
         "' (or set engram.deterministic_addressing = false to read "
         "through the journal)";
}

std::unique_ptr<TableView> TableView::Open(const std::string& path, const ViewOptions& opts) {
  auto v = std::unique_ptr<TableView>(new TableView());
  // The journal is read under the same fold lock as the base, from the same file.
  OpenOptions oo = opts.open;
  if (oo.lock == ReadLock::kOpen) oo.lock = ReadLock::kHold;
  v->reader_ = Reader::Open(path, oo);
  const int fd = v->reader_->fd();
  uint64_t len = base::RegularFileSize(fd, path);
  v->journal_ = ReadJournal(fd, path, v->reader_->header(), v->reader_->layout(), len);
  if (opts.open.lock == ReadLock::kOpen) v->reader_->ReleaseReadLock();
  RequireIntact(v->journal_, path);
  ENGRAM_CHECK(!opts.deterministic_addressing || v->journal_.committed.empty(), Code::kConfig,
               DeterministicAddressingError(path, v->journal_.committed.size()));
  return v;
}

}  // namespace engram::format

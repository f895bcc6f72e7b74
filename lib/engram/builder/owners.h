// Owner selection for build and merge (schemas/table_format.md §6):
//   exact:  n-gram counts in a memory budget, spilled as sorted zstd runs, k-way merged; owners
//           are exact and counts are additive, so corpus shards merge into the one-process table.
//   sketch: one Boyer-Moore majority cell per row (O(rows) memory, no temp disk); deterministic in
//           input order per sub-table; owner counts and loads are approximate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/builder/token_stream.h"
#include "engram/format/layout.h"

namespace engram::builder {

// Where owners land: the table's TAGS and (optional) STATS sections, or a heap array of owner
// counts when there are no STATS.
struct OwnerArrays {
  uint32_t* tags = nullptr;
  uint8_t* stats = nullptr;
  std::vector<uint32_t> own;
};

// A sorted, merged stream of (n-gram, count) records of one order.
using RecordSink = std::function<void(const uint32_t* ids, uint64_t count)>;

class ExactCounter {
 public:
  // memory_bytes: the counting budget for all threads together; temp_dir: where spill runs go.
  ExactCounter(const hash::AddressSpec& spec, uint64_t memory_bytes, std::string temp_dir,
               int threads, base::Reporter& reporter);
  ~ExactCounter();  // removes every spill run
  ExactCounter(const ExactCounter&) = delete;
  ExactCounter& operator=(const ExactCounter&) = delete;

  // Counts the n-grams of a block that fall in `thread`'s share: the n-grams are split among the
  // threads by hash, so every thread (0..threads-1) must be given every block, and no n-gram is
  // counted by two threads. Different threads may call concurrently.
  void AddBlock(const TokenBlock& block, int thread);
  // Records the merge reads: spilled ones plus those still in memory.
  uint64_t records() const;
  // Chooses the owners into `arrays` as OwnerAssigner would from every share's merged records,
  // with each thread merging its own share (a share with no spill run is read straight from its
  // counter, unsorted: owner choice and STATS sums do not depend on the order of the records).
  // Returns the distinct n-grams. The arrays are overwritten, as for a new table: owners are
  // chosen in a packed copy of 16 bytes a row (one cache line a row), then copied in. Call it
  // once, instead of WriteMerged.
  uint64_t AssignOwners(const format::Layout& layout, OwnerArrays* arrays,
                        const std::function<void(uint64_t done, uint64_t total)>& progress = {});

  // Writes every order's merged records to a part stream: records of order 2, a terminator
  // (count 0), records of order 3, a terminator, ... Call it once: it sorts the in-memory counters
  // in place.
  void WriteMerged(class ZstdWriter& w);

  uint64_t runs() const noexcept { return runs_.size(); }
  uint64_t spilled_bytes() const noexcept { return spilled_bytes_; }

 private:
  struct ThreadState;
  void Spill(ThreadState& t);
  // Streams every order's records, all shares merged in numeric order (all of order 2 first, ...),
  // to the sinks.
  void Merge(const std::function<void(uint32_t order)>& begin_order, const RecordSink& sink);
  const hash::AddressSpec& spec_;
  uint64_t budget_per_thread_;
  std::string temp_dir_;
  base::Reporter& reporter_;
  std::vector<std::unique_ptr<ThreadState>> threads_;
  struct Run {
    uint32_t order;
    int share;  // the thread whose n-grams it holds
    std::string path;
  };
  std::vector<Run> runs_;
  uint64_t spilled_bytes_ = 0;
  uint64_t spilled_records_ = 0;
  uint64_t run_seq_ = 0;
  std::mutex* mu_;
};

// k-way merges the records of one order from several part streams (each positioned at that
// order; each is left after its terminator), summing counts of equal n-grams.
void MergePartStreams(const std::vector<class ZstdReader*>& readers, uint32_t order,
                      const RecordSink& sink);

// Merges the exact records of several parts into one part body (every order 2..max_order, counts
// of equal n-grams summed, each order ended by its zero record), as merge --partial writes it.
void WriteMergedPartStreams(const std::vector<class ZstdReader*>& readers, uint32_t max_order,
                            class ZstdWriter& w);

// Applies a merged record stream of one order to the owner cells: rows of all (layer, head)
// sub-tables of that order. Buffers records and assigns in parallel chunks.
class OwnerAssigner {
 public:
  OwnerAssigner(const format::Layout& layout, OwnerArrays* arrays, int threads);
  void BeginOrder(uint32_t order);
  void Add(const uint32_t* ids, uint64_t count);
  void Flush();
  uint64_t distinct() const noexcept { return distinct_; }

 private:
  const format::Layout& l_;
  OwnerArrays* oa_;
  int threads_;
  uint32_t order_ = 0;
  size_t n_ = 0;                  // records buffered
  std::vector<uint32_t> ids_;     // kChunk records of order_ ids
  std::vector<uint64_t> counts_;  // kChunk
  std::vector<uint32_t> tags_;    // kChunk, filled by Flush
  uint64_t distinct_ = 0;
};

// Sketch mode over blocks; Finish() writes tags and STATS (owner_count = the majority vote margin,
// load = a 16-bit linear-counting estimate; both documented as approximate).
class SketchOwners {
 public:
  SketchOwners(const format::Layout& layout, int threads, uint32_t shard_index = 0,
               uint32_t shard_count = 1);
  ~SketchOwners();
  void AddBlock(const TokenBlock& block);
  void Finish(OwnerArrays* arrays) const;
  // Part streams: this shard's sub-tables' cells out; any part's cells in.
  void WriteCells(class ZstdWriter& w) const;
  void ReadCells(class ZstdReader& r);
  // Sub-tables this shard owns (sketch shards split sub-tables).
  bool Owns(size_t sub) const noexcept { return sub % shard_count_ == shard_index_; }

 private:
  struct Cell {
    uint32_t tag, vote, total;
    uint16_t seen, pad;
  };
  static_assert(sizeof(Cell) == 16);
  const format::Layout& l_;
  int threads_;
  uint32_t shard_index_, shard_count_;
  std::vector<Cell> cells_;
};

// Default counting budget: a quarter of available memory, between 256 MiB and 8 GiB.
uint64_t DefaultBuildMemory();

// Removes spill files "engram-build.<pid>.*" of processes that no longer run.
void RemoveStaleSpills(const std::string& temp_dir);

}  // namespace engram::builder

// Exact n-gram counts for owner selection (schemas/table_format.md §6): counted in a memory
// budget, spilled as sorted zstd runs, k-way merged; owners are exact and counts additive, so
// corpus shards merge into the one-process table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/builder/owner_assigner.h"
#include "engram/builder/record_merge.h"
#include "engram/builder/token_stream.h"
#include "engram/format/layout.h"

namespace engram::builder {

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
  // The cells are chosen in passes of at most `cell_budget` bytes (PlanOwnerPasses); each pass
  // merges the records of its orders again.
  uint64_t AssignOwners(const format::Layout& layout, OwnerArrays* arrays, uint64_t cell_budget,
                        const std::function<void(uint64_t done, uint64_t total)>& progress = {});

  // Writes every order's merged records to a part stream: records of order 2, a terminator
  // (count 0), records of order 3, a terminator, ... Call it once: it sorts the in-memory counters
  // in place.
  void WriteMerged(ZstdWriter& w);

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
void MergePartStreams(const std::vector<ZstdReader*>& readers, uint32_t order,
                      const RecordSink& sink);

// Merges the exact records of several parts into one part body (every order 2..max_order, counts
// of equal n-grams summed, each order ended by its zero record), as merge --partial writes it.
void WriteMergedPartStreams(const std::vector<ZstdReader*>& readers, uint32_t max_order,
                            ZstdWriter& w);

// Default counting budget: a quarter of available memory, between 256 MiB and 8 GiB.
uint64_t DefaultBuildMemory();

// Removes spill files "engram-build.<pid>.*" of processes that no longer run.
void RemoveStaleSpills(const std::string& temp_dir);

}  // namespace engram::builder

// serve's generation queue: requests wait in a bounded queue, one scheduler thread takes up to
// max_batch of them at a time into model::Session::GenerateBatch, records their outcome in the
// counters the status page and /metrics show, and hands each result to its handler's on_done.
// A table file damaged under the session (table_guard.h) turns the batches it served into 503s.
// Internal to libengram_serve.so.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engram/base/reporter.h"
#include "engram/model/session.h"

namespace engram::serve {

// One queued or running generation request. The handler that made it sets req.on_text and
// on_done; the scheduler thread fills `result` and calls on_done once.
struct Job {
  uint64_t id = 0;
  bool chat = false, stream = false, include_usage = false;
  model::GenerateRequest req;
  model::GenerateResult result;
  // Set with result.error when the server, not the request, is the reason it was not served
  // (the table file damaged under the server, a shutdown past its grace period): HTTP 503.
  bool unavailable = false;
  // The request is abandoned (client gone, shutdown): a queued job is dropped, a running one
  // stops at its next piece of text (req.on_text must return false when this is set).
  std::atomic<bool> cancelled{false};
  // Called once, on the scheduler thread (or Drain's), when `result` is final. Must not throw.
  std::function<void(Job&)> on_done;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// Upper bounds (seconds) of the request latency histogram.
inline constexpr double kLatencyBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

// What the server has answered so far.
struct ServeCounters {
  uint64_t requests = 0, failed = 0, rejected = 0, unauthorized = 0, cancelled = 0;
  uint64_t prompt_tokens = 0, completion_tokens = 0, lookups = 0, hits = 0, bypasses = 0;
  uint64_t batches = 0, batched_requests = 0;
  uint64_t table_unavailable = 0;  // requests answered 503 because the table file was damaged
  uint64_t latency_counts[std::size(kLatencyBuckets) + 1] = {};
  double latency_sum = 0;
  std::deque<std::pair<uint64_t, double>> recent;  // (request id, hit rate), newest last
};

// A consistent view of the scheduler for /metrics and the status page.
struct ServeSnapshot {
  ServeCounters counters;
  size_t queued = 0, running = 0;
  const model::Session* session = nullptr;  // null while loading; lives as long as the Scheduler
  model::TableState table;
  size_t queue_capacity = 0;  // effective (after the session said its batch size)
  uint64_t http_refused = 0;  // requests refused by an HTTP limit (filled by the server)
  size_t http_connections = 0;
};

// hits / lookups, 0 without lookups.
double HitRate(uint64_t hits, uint64_t lookups);

// Thread-safe.
class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // queue_capacity: requests that may wait beyond those generating (0 = 4 x the session's
  // max_batch). The reporter must outlive the scheduler.
  Scheduler(size_t queue_capacity, base::Reporter& rep)
      : queue_capacity_(queue_capacity), rep_(rep) {}
  ~Scheduler() { Drain(Clock::time_point::max()); }
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Hands over the loaded session, guards its table mapping (table_guard.h) and starts the
  // scheduler thread.
  void SetSession(std::unique_ptr<model::Session> session);
  // Queues a job (setting its id). False, with the reason, while loading, once draining, or when
  // the queue is full; on_done is then never called.
  bool Submit(const std::shared_ptr<Job>& job, std::string* why);
  // A request refused with 401 (counted for /metrics).
  void CountUnauthorized();
  // Refuses new jobs and lets the queued and running ones finish until `deadline`; then cancels
  // what is left (queued jobs finish unavailable, running ones stop at their next piece and
  // finish unavailable) and waits for that. Stops the thread. Idempotent.
  void Drain(Clock::time_point deadline);
  ServeSnapshot Snapshot() const;
  // The session once loaded (null before); it lives as long as the Scheduler.
  const model::Session* session() const;

 private:
  // The table file's identity, as model::Session's reload check sees it.
  struct FileStamp {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  static FileStamp Stamp(const std::string& path);
  void Loop();
  void Finish(Job& job);
  void LogRequest(const Job& job);
  // Before a batch: "" or why the table cannot serve it (the state a fault damaged, unchanged).
  std::string TableUnavailable();
  // After a batch: a fault during it marks its table state damaged; jobs served by a damaged
  // state become unavailable.
  void CheckTableAfter(const std::vector<std::shared_ptr<Job>>& batch);
  void MarkDamaged(uint64_t generation);
  std::string DamagedMessage() const;

  const size_t queue_capacity_;
  base::Reporter& rep_;
  mutable std::mutex mu_;  // guards everything below but the scheduler thread's own state
  std::condition_variable cv_;
  std::unique_ptr<model::Session> session_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;  // taken by the scheduler thread, not finished
  int max_batch_ = 1;
  bool draining_ = false, stopped_ = false, cancel_all_ = false;
  uint64_t next_id_ = 0;
  ServeCounters counters_;
  std::thread thread_;

  // The scheduler thread's own.
  bool low_rate_explained_ = false;  // a low hit rate is explained once
  uint64_t seen_faults_ = 0;         // TableFaults() already accounted for
  bool damaged_ = false;             // a table state read past the end of its file
  uint64_t damaged_generation_ = 0;
  FileStamp damaged_stamp_;  // the file as it was when that state was last found damaged
};

}  // namespace engram::serve

// The scheduler thread: batches of queued jobs through the session, per-request log lines, the
// counters, and the table-damage bookkeeping.
#include "engram/serve/scheduler.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "engram/serve/table_guard.h"

namespace engram::serve {

using base::LogLevel;

double HitRate(uint64_t hits, uint64_t lookups) {
  return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
}

void Scheduler::SetSession(std::unique_ptr<model::Session> session) {
  if (session->info().engram) GuardTableMapping(session->info().table_path);
  seen_faults_ = TableFaults();
  {
    std::lock_guard<std::mutex> lock(mu_);
    max_batch_ = std::max(1, session->info().max_batch);
    session_ = std::move(session);
  }
  thread_ = std::thread([this] { Loop(); });
}

bool Scheduler::Submit(const std::shared_ptr<Job>& job, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_) {
    *why = "the server is shutting down";
    return false;
  }
  if (!session_) {
    *why = "Loading model";
    return false;
  }
  const size_t cap = queue_capacity_ ? queue_capacity_ : 4 * static_cast<size_t>(max_batch_);
  if (queue_.size() >= cap) {
    ++counters_.rejected;
    *why = "the request queue is full (" + std::to_string(cap) + " waiting); retry shortly";
    return false;
  }
  job->id = ++next_id_;
  queue_.push_back(job);
  cv_.notify_all();
  return true;
}

void Scheduler::CountUnauthorized() {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.unauthorized;
}

void Scheduler::Drain(Clock::time_point deadline) {
  std::vector<std::shared_ptr<Job>> orphans;  // queued with no thread to run them
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    draining_ = true;
    auto idle = [&] { return queue_.empty() && running_.empty(); };
    const bool in_time = deadline == Clock::time_point::max()
                             ? (cv_.wait(lock, idle), true)
                             : cv_.wait_until(lock, deadline, idle);
    if (!in_time) {
      // Past the grace period: whatever is left stops now.
      cancel_all_ = true;
      for (auto& j : queue_) j->cancelled = true;
      for (auto& j : running_) j->cancelled = true;
      if (thread_.joinable()) cv_.wait(lock, idle);
    }
    if (!thread_.joinable()) orphans.assign(queue_.begin(), queue_.end()), queue_.clear();
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& j : orphans) {
    j->unavailable = true;
    j->result.finish_reason = "error";
    j->result.error = "the server shut down before this request ran; retry with another server";
    if (j->on_done) j->on_done(*j);
  }
}

ServeSnapshot Scheduler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServeSnapshot s;
  s.counters = counters_;
  s.queued = queue_.size();
  s.running = running_.size();
  s.session = session_.get();
  s.queue_capacity = queue_capacity_ ? queue_capacity_ : 4 * static_cast<size_t>(max_batch_);
  if (session_) s.table = session_->table_state();
  return s;
}

const model::Session* Scheduler::session() const {
  std::lock_guard<std::mutex> lock(mu_);
  return session_.get();
}

Scheduler::FileStamp Scheduler::Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

std::string Scheduler::DamagedMessage() const {
  return "the table file " + session_->info().table_path +
         " is damaged under the server (table generation " + std::to_string(damaged_generation_) +
         " read past the end of the file: it was truncated or is being rewritten in place); "
         "requests are refused until the file is restored or replaced. Replace tables by "
         "rename (as build and sort-buckets write them), never in place";
}

void Scheduler::MarkDamaged(uint64_t generation) {
  if (!damaged_ || damaged_generation_ != generation)
    rep_.Log(LogLevel::kWarning,
             "[serve] table generation " + std::to_string(generation) + " of " +
                 session_->info().table_path +
                 " read past the end of its file (truncated under the server?): requests get "
                 "503 until the file is restored or replaced");
  damaged_ = true;
  damaged_generation_ = generation;
  damaged_stamp_ = Stamp(session_->info().table_path);
}

std::string Scheduler::TableUnavailable() {
  if (!session_->info().engram) return "";
  if (const uint64_t f = TableFaults(); f != seen_faults_) {  // a fault between batches
    seen_faults_ = f;
    MarkDamaged(session_->table_state().generation);
  }
  // A changed file gets a batch: the session reloads it before generating, and CheckTableAfter
  // sees whether a new state served.
  if (damaged_ && session_->table_state().generation == damaged_generation_ &&
      Stamp(session_->info().table_path) == damaged_stamp_)
    return DamagedMessage();
  return "";
}

void Scheduler::CheckTableAfter(const std::vector<std::shared_ptr<Job>>& batch) {
  if (!session_->info().engram || batch.empty()) return;
  const uint64_t generation = batch.front()->result.table.generation;
  if (const uint64_t f = TableFaults(); f != seen_faults_) {
    seen_faults_ = f;
    MarkDamaged(generation ? generation : session_->table_state().generation);
  } else if (damaged_ && generation == damaged_generation_) {
    damaged_stamp_ = Stamp(session_->info().table_path);  // the change did not load: still damaged
  } else if (damaged_ && generation > damaged_generation_) {
    damaged_ = false;
    rep_.Log(LogLevel::kInfo, "[serve] table generation " + std::to_string(generation) +
                                  " serves again after the damaged one");
  }
  if (!damaged_) return;
  for (const auto& j : batch) {
    model::GenerateResult& r = j->result;
    const bool request_error =
        r.finish_reason == "error" && r.error_code == static_cast<int>(Code::kInvalidArgument);
    if (r.table.generation != damaged_generation_ || request_error) continue;
    j->unavailable = true;
    r.finish_reason = "error";
    r.error = DamagedMessage();
  }
}

void Scheduler::LogRequest(const Job& job) {
  const auto& r = job.result;
  const std::string head = "[engram] request " + std::to_string(job.id) + ": ";
  if (r.finish_reason == "error") {
    rep_.Log(LogLevel::kWarning, head + "failed: " + r.error);
    return;
  }
  if (r.finish_reason == "cancelled")
    rep_.Log(LogLevel::kInfo, head + "cancelled: the client went away after " +
                                  std::to_string(r.completion_tokens) +
                                  " generated token(s); its generation stopped");
  const model::SessionInfo& info = session_->info();
  if (!info.engram) return;
  if (r.bypass)
    rep_.Log(LogLevel::kInfo,
             head + "engram bypass: the prompt has " + std::to_string(r.prompt_tokens) +
                 " token(s), fewer than the n-gram order " + std::to_string(info.ngram_order) +
                 ", so its first positions have no full n-gram (normal, not an "
                 "error)");
  const uint64_t l = r.prompt_lookups + r.gen_lookups, h = r.prompt_hits + r.gen_hits;
  char line[256];
  std::snprintf(line, sizeof line,
                "engram_hit_rate: %.2f (prompt %.2f, generated %.2f; %llu hits / %llu lookups), "
                "engram lookup miss: %llu (table generation %llu)",
                HitRate(h, l), HitRate(r.prompt_hits, r.prompt_lookups),
                HitRate(r.gen_hits, r.gen_lookups), static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(l), static_cast<unsigned long long>(l - h),
                static_cast<unsigned long long>(r.table.generation));
  rep_.Log(LogLevel::kInfo, head + line);
  // A rate far below what the table scores on its own corpus is explained, once.
  if (info.low_hit_rate_note && !low_rate_explained_) {
    std::string note = info.low_hit_rate_note(HitRate(h, l), l);
    if (!note.empty()) {
      low_rate_explained_ = true;
      rep_.Log(LogLevel::kWarning, head + note + " (said once)");
    }
  }
}

// Counts a finished job and hands it to its handler.
void Scheduler::Finish(Job& job) {
  const auto& r = job.result;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - job.start).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServeCounters& c = counters_;
    ++c.requests;
    c.failed += r.finish_reason == "error";
    c.cancelled += r.finish_reason == "cancelled";
    c.table_unavailable += job.unavailable && !cancel_all_;
    c.prompt_tokens += r.prompt_tokens;
    c.completion_tokens += r.completion_tokens;
    c.lookups += r.prompt_lookups + r.gen_lookups;
    c.hits += r.prompt_hits + r.gen_hits;
    c.bypasses += r.bypass;
    size_t k = 0;
    while (k < std::size(kLatencyBuckets) && secs > kLatencyBuckets[k]) ++k;
    ++c.latency_counts[k];
    c.latency_sum += secs;
    if (r.finish_reason != "error" && r.prompt_lookups + r.gen_lookups > 0) {
      c.recent.emplace_back(job.id,
                            HitRate(r.prompt_hits + r.gen_hits, r.prompt_lookups + r.gen_lookups));
      if (c.recent.size() > 60) c.recent.pop_front();
    }
  }
  if (job.on_done) job.on_done(job);
}

void Scheduler::Loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> batch, dropped;
    bool shutdown_cancel;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
      if (stopped_ && queue_.empty()) return;
      while (!queue_.empty() && batch.size() < static_cast<size_t>(max_batch_)) {
        (queue_.front()->cancelled ? dropped : batch).push_back(queue_.front());
        queue_.pop_front();
      }
      running_ = batch;
      running_.insert(running_.end(), dropped.begin(), dropped.end());
      shutdown_cancel = cancel_all_;
    }
    for (auto& j : dropped) {  // their client went away, or the grace period ended
      j->result.finish_reason = shutdown_cancel ? "error" : "cancelled";
      j->unavailable = shutdown_cancel;
      if (shutdown_cancel)
        j->result.error = "the server shut down before this request ran; retry with another server";
      Finish(*j);
    }
    if (!batch.empty()) {
      if (std::string why = TableUnavailable(); !why.empty()) {
        for (auto& j : batch) {
          j->unavailable = true;
          j->result.finish_reason = "error";
          j->result.error = why;
          j->result.table = session_->table_state();
        }
      } else {
        std::vector<model::GenerateRequest*> reqs;
        for (auto& j : batch) reqs.push_back(&j->req);
        std::vector<model::GenerateResult> results;
        session_->GenerateBatch(reqs, &results);
        for (size_t i = 0; i < batch.size(); ++i) batch[i]->result = std::move(results[i]);
        CheckTableAfter(batch);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        shutdown_cancel = cancel_all_;
      }
      for (auto& j : batch) {
        Job& job = *j;
        if (job.cancelled && shutdown_cancel && !job.unavailable) {
          job.unavailable = true;
          job.result.finish_reason = "error";
          job.result.error =
              "the server shut down (its grace period ended) before this request finished; "
              "retry with another server";
        }
        LogRequest(job);
        Finish(job);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_.clear();
      if (!batch.empty()) {
        ++counters_.batches;
        counters_.batched_requests += batch.size();
      }
    }
    cv_.notify_all();
  }
}

}  // namespace engram::serve

// SIGINT/SIGTERM as a flag, for writers that must finish or undo a step before they stop
// (sort-buckets). Blocking waits (flock, fcntl locks) return EINTR and check it.
#pragma once

#include <exception>

namespace engram::base {

// Installs handlers for SIGINT and SIGTERM that only record the signal (no SA_RESTART).
void CatchInterrupts();
// The signal caught since CatchInterrupts (SIGINT or SIGTERM), or 0.
int PendingInterrupt() noexcept;

// Thrown at a safe point after a caught signal: nothing is half done.
class Interrupted : public std::exception {
 public:
  explicit Interrupted(int sig) : sig_(sig) {}
  int signal() const noexcept { return sig_; }
  const char* what() const noexcept override { return "interrupted"; }

 private:
  int sig_;
};

inline void ThrowIfInterrupted() {
  if (int s = PendingInterrupt()) throw Interrupted(s);
}

}  // namespace engram::base

// The handler stores the signal number; everything else reads it.
#include "engram/base/interrupt.h"

#include <signal.h>

#include <atomic>

namespace engram::base {

namespace {

std::atomic<int> g_signal{0};

void OnSignal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

void CatchInterrupts() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked lock wait returns EINTR
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int PendingInterrupt() noexcept { return g_signal.load(std::memory_order_relaxed); }

}  // namespace engram::base

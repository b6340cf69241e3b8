#include "redis/sigpipe_guard.hpp"

#include <pthread.h>

#include <ctime>

namespace redlimit::detail {
namespace {

bool sigpipe_pending() noexcept {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

bool sigpipe_ignored() noexcept {
  struct sigaction current {};
  return sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

SigpipeGuard::SigpipeGuard(bool needed) noexcept {
  if (!needed) return;
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  active_ = pthread_sigmask(SIG_BLOCK, &block, &previous_mask_) == 0;
  // Why only then: a SIGPIPE can be pending for this thread only if the thread had it blocked
  // already (otherwise it would have been delivered).
  if (active_ && sigismember(&previous_mask_, SIGPIPE) == 1) was_pending_ = sigpipe_pending();
}

SigpipeGuard::~SigpipeGuard() {
  if (!active_) return;
  if (write_failed_ && !was_pending_ && sigpipe_pending()) {
    sigset_t only_sigpipe;
    sigemptyset(&only_sigpipe);
    sigaddset(&only_sigpipe, SIGPIPE);
    const timespec no_wait{0, 0};
    sigtimedwait(&only_sigpipe, nullptr, &no_wait);
  }
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

}  // namespace redlimit::detail

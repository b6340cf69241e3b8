#pragma once

#include <signal.h>

namespace redlimit::detail {

/// True when the process ignores SIGPIPE, so writes to a closed socket cannot raise it.
bool sigpipe_ignored() noexcept;

/// While it lives, a write to a closed socket on this thread cannot kill the process with
/// SIGPIPE: the signal is blocked for the thread, and one raised meanwhile is discarded (a
/// SIGPIPE that was already pending before is left alone). Does nothing when `needed` is false.
class SigpipeGuard {
 public:
  explicit SigpipeGuard(bool needed) noexcept;
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool active_ = false;
  bool was_pending_ = false;
  sigset_t previous_mask_;
};

}  // namespace redlimit::detail

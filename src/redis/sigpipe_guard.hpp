#pragma once

#include <signal.h>

namespace redlimit::detail {

/// True when the process ignores SIGPIPE, so writes to a closed socket cannot raise it.
bool sigpipe_ignored() noexcept;

/// While it lives, a write to a closed socket on this thread cannot kill the process with
/// SIGPIPE: the signal is blocked for the thread, and one raised by a write reported through
/// write_failed() is discarded (a SIGPIPE that was already pending before is left alone). Does
/// nothing when `needed` is false.
///
/// Why write_failed(): only a failed write raises SIGPIPE, so a guard whose writes succeeded
/// costs two system calls (block, restore) instead of four.
class SigpipeGuard {
 public:
  explicit SigpipeGuard(bool needed) noexcept;
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

  /// A write under this guard failed (or may have): look for its SIGPIPE on the way out.
  void write_failed() noexcept { write_failed_ = true; }

 private:
  bool active_ = false;
  bool was_pending_ = false;
  bool write_failed_ = false;
  sigset_t previous_mask_;
};

}  // namespace redlimit::detail

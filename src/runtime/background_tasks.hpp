#pragma once

#include <uv.h>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <thread>

#include "redlimit/task.hpp"
#include "redlimit/task_group.hpp"

namespace redlimit::detail {

/// Passes `error`, escaped from a task nobody awaits, to the error handler (set_error_handler).
void report_error(std::exception_ptr error);

/// Starts `task` at once, detached: it runs until its first suspension before this returns, and
/// its exception goes to the error handler. For work that completes without suspending (in
/// process), so that it needs no loop iteration to happen.
void start_detached(Task<void> task);

/// The library's own background work for one client: lease releases, refunds of abandoned
/// reservations, rollbacks of grants whose reply was lost. Each task starts on the next loop
/// iteration, as with spawn(), and its exception goes to the error handler; unlike spawn(),
/// wait_all() tells when they have all ended, so Client::close() can let them finish first.
///
/// Use on the loop's thread (made there). Must outlive its tasks: wait_all() before destruction.
class BackgroundTasks {
 public:
  explicit BackgroundTasks(uv_loop_t* loop)
      : loop_(loop), owner_thread_(std::this_thread::get_id()) {}
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;

  /// Starts `task` on the next iteration of the loop; after stop_accepting(), drops it. Throws
  /// UsageError, before anything is created, when called from a thread other than the loop's
  /// (a lease destroyed there: its permits come back at expiry).
  void start(Task<void> task);
  /// Starts `task` at once, within this call, until its first suspension: for work the caller
  /// awaits next (see outliving()). Call it when accepting(), on the loop's thread.
  void start_now(Task<void> task);
  /// Whether start() and start_now() still take tasks.
  bool accepting() const noexcept { return accepting_; }
  /// From now on start() drops its task unstarted: the client it would use has closed (a lease
  /// released then gets its permits back at expiry; a refund, never).
  void stop_accepting() noexcept { accepting_ = false; }
  /// Resumes once no task is running, tasks started meanwhile included. One waiter at a time.
  Task<void> wait_all();
  /// Tasks started and not yet ended.
  std::size_t running() const noexcept { return group_.running(); }

 private:
  uv_loop_t* loop_;
  std::thread::id owner_thread_;
  TaskGroup group_;
  bool accepting_ = true;
};

}  // namespace redlimit::detail

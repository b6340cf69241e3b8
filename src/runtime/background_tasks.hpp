#pragma once

#include <uv.h>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <stop_token>
#include <thread>

#include "redlimit/task.hpp"
#include "redlimit/task_group.hpp"
#include "runtime/forward_stop.hpp"

namespace redlimit::detail {

/// Passes `error`, escaped from a task nobody awaits, to the error handler (set_error_handler).
void report_error(std::exception_ptr error);

/// Starts `task` at once, detached: it runs until its first suspension before this returns, and
/// its exception goes to the error handler. For work that completes without suspending (in
/// process), so that it needs no loop iteration to happen.
void start_detached(Task<void> task);

/// The one scope of a client's background work (cppcoro's async_scope is the model): every
/// task the library starts for a client runs in it, and Client::close() joins it, so nothing
/// the client started outlives close(). Each task's exception goes to the error handler.
///
/// Two kinds of task, joined at different points of close():
/// - work done for a caller (start(), start_now()): lease releases, refunds of abandoned
///   reservations, rollbacks of grants whose reply was lost. close() waits for it first, while
///   the connections are still up (wait_all()), then takes no more (stop_accepting()).
/// - the client's own upkeep (start_upkeep(), start_upkeep_now()): a topology refresh, a
///   Sentinel lookup, a batch of script calls, a retired connection's close, a lease renewal
///   beside a wait. Taken while the client closes, which needs some of it (a batch in flight);
///   the parts of the client that start it end it as they close, and close() joins it last
///   (join()). Upkeep started after that is dropped.
///
/// Use on the loop's thread (made there). Must outlive its tasks: join() before destruction.
class BackgroundTasks {
 public:
  explicit BackgroundTasks(uv_loop_t* loop)
      : loop_(loop), owner_thread_(std::this_thread::get_id()) {}
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;

  /// Starts `task`, work for a caller, on the next iteration of the loop (never inside its
  /// starter: a destructor, a callback); after stop_accepting(), drops it. Throws UsageError,
  /// before anything is created, when called from a thread other than the loop's (a lease
  /// destroyed there: its permits come back at expiry).
  void start(Task<void> task);
  /// Starts `task`, work for a caller, at once, within this call, until its first suspension:
  /// for work the caller awaits next (see outliving()). Call it when accepting(), on the loop's
  /// thread.
  void start_now(Task<void> task);
  /// Whether start() and start_now() still take tasks.
  bool accepting() const noexcept { return accepting_; }
  /// From now on start() drops its task unstarted: the client it would use has closed (a lease
  /// released then gets its permits back at expiry; a refund, never).
  void stop_accepting() noexcept { accepting_ = false; }
  /// Resumes once no work for a caller is running, tasks started meanwhile included.
  Task<void> wait_all();

  /// Starts `task`, the client's upkeep, on the next iteration of the loop; once join() has
  /// begun, drops it (a lease renewal beside a wait on a closed client: the claim at the wake
  /// makes it good). On the loop's thread.
  void start_upkeep(Task<void> task);
  /// Starts `task`, the client's upkeep, at once, until its first suspension (a batch sent
  /// in this iteration). On the loop's thread, before join().
  void start_upkeep_now(Task<void> task);
  /// Resumes once no task of either kind is running; from its call on, upkeep is dropped.
  /// One waiter at a time (as wait_all()).
  Task<void> join();

  /// Stopped when the client begins to close: work that tries again stops trying then.
  std::stop_token closing() const noexcept { return closing_.get_token(); }

  /// Stops every WaitingCall (the client begins to close), then resumes once each has ended
  /// (each gives its reservations back first, while the client still sends commands).
  Task<void> end_waiting_calls();

  /// Held by a caller's call for as long as it may wait for permits (acquire(), acquire_all(),
  /// Semaphore::acquire()): its stop token `stop` also stops when the client begins to close,
  /// and close() waits for the call to end. Throws Cancelled once the client has begun to
  /// close. Nothing when made with no tasks (in process), or off the loop's thread.
  class WaitingCall {
   public:
    WaitingCall(BackgroundTasks* tasks, std::stop_token& stop);
    ~WaitingCall();
    WaitingCall(const WaitingCall&) = delete;
    WaitingCall& operator=(const WaitingCall&) = delete;

   private:
    BackgroundTasks* tasks_ = nullptr;
    std::stop_source stop_;
    std::optional<std::stop_callback<ForwardStop>> from_caller_;
    std::optional<std::stop_callback<ForwardStop>> from_close_;
  };

 private:
  uv_loop_t* loop_;
  std::thread::id owner_thread_;
  TaskGroup work_;
  TaskGroup upkeep_;
  bool accepting_ = true;
  bool joined_ = false;       ///< join() has begun
  std::stop_source closing_;  ///< requested when the client begins to close
  std::size_t waiting_calls_ = 0;
};

}  // namespace redlimit::detail

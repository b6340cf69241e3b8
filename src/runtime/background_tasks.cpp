#include "runtime/background_tasks.hpp"

#include <cassert>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

// Why a loop iteration first: the task may be started from a destructor or from inside a
// callback; from the loop it runs as a spawned task would, never inside its starter.
Task<void> on_next_iteration(uv_loop_t* loop, Task<void> task) {
  std::exception_ptr error;
  try {
    co_await sleep_for(loop, std::chrono::microseconds(0));
    co_await std::move(task);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) report_error(error);
}

/// `task`, its exception passed to the error handler.
Task<void> reporting(Task<void> task) {
  std::exception_ptr error;
  try {
    co_await std::move(task);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) report_error(error);
}

/// A coroutine that starts at once and destroys itself when it ends.
struct Eager {
  struct promise_type {
    Eager get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all
  };
};

Eager run_eagerly(Task<void> task) {
  co_await reporting(std::move(task));
}

}  // namespace

void start_detached(Task<void> task) {
  run_eagerly(std::move(task));
}

void BackgroundTasks::start(Task<void> task) {
  if (std::this_thread::get_id() != owner_thread_) {
    throw UsageError("a redlimit Client was used from a thread other than its loop's");
  }
  if (!accepting_) return;
  work_.add(on_next_iteration(loop_, std::move(task)));
}

void BackgroundTasks::start_now(Task<void> task) {
  work_.add(reporting(std::move(task)));
}

Task<void> BackgroundTasks::wait_all() {
  co_await work_.join();
}

void BackgroundTasks::start_upkeep(Task<void> task) {
  if (joined_) return;
  upkeep_.add(on_next_iteration(loop_, std::move(task)));
}

void BackgroundTasks::start_upkeep_now(Task<void> task) {
  assert(!joined_ && "upkeep started at once after join()");
  upkeep_.add(reporting(std::move(task)));
}

Task<void> BackgroundTasks::join() {
  joined_ = true;
  // Why a loop: a task of one kind may start one of the other while the first join waits.
  while (work_.running() + upkeep_.running() > 0) {
    co_await work_.join();
    co_await upkeep_.join();
  }
}

Task<void> BackgroundTasks::end_waiting_calls() {
  closing_.request_stop();
  // Why polled, and only here: a call ends by its frame's destruction, where resuming close()
  // inline could destroy the client under it. Each ends within a command deadline.
  while (waiting_calls_ > 0)
    co_await sleep_for(loop_, std::chrono::milliseconds(1));
}

BackgroundTasks::WaitingCall::WaitingCall(BackgroundTasks* tasks, std::stop_token& stop) {
  // Why not from another thread: the call fails there with UsageError at its first command.
  if (tasks == nullptr || std::this_thread::get_id() != tasks->owner_thread_) return;
  // Why refused: close() may already be past the waiting calls it ends and waits for.
  if (tasks->closing_.stop_requested()) {
    throw Cancelled("a call that waits for permits cancelled: its client is closing");
  }
  tasks_ = tasks;
  ++tasks_->waiting_calls_;
  from_caller_.emplace(stop, ForwardStop{&stop_});
  from_close_.emplace(tasks_->closing_.get_token(), ForwardStop{&stop_});
  stop = stop_.get_token();
}

BackgroundTasks::WaitingCall::~WaitingCall() {
  if (tasks_ != nullptr) --tasks_->waiting_calls_;
}

}  // namespace redlimit::detail

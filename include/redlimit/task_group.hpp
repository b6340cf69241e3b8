#pragma once
/// @file task_group.hpp
/// Running several tasks at once on one loop and waiting for all of them.

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include "redlimit/task.hpp"

namespace redlimit {

/// Runs tasks concurrently on the calling thread's loop: add() starts a task at once (up to its
/// first suspension); `co_await group.join()` resumes when every added task has ended. The first
/// exception a task let escape is rethrown by join(); the other tasks still run to their end.
///
/// Non-copyable. Use on the loop's thread; the group must outlive its tasks (join() first).
class TaskGroup {
 public:
  TaskGroup() = default;
  ~TaskGroup() { assert(running_ == 0 && "a TaskGroup destroyed before join() resumed"); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  /// Starts `task`; it runs until its first suspension before add() returns.
  void add(Task<void> task) {
    ++running_;
    run_member(this, std::move(task));
  }
  /// The tasks added and not yet ended.
  std::size_t running() const noexcept { return running_; }

  /// `co_await group.join()`: resumes when no task is running; rethrows the first escaped
  /// exception. Only one coroutine may join at a time.
  auto join() {
    struct Awaiter {
      TaskGroup* group;
      bool await_ready() const noexcept { return group->running_ == 0; }
      void await_suspend(std::coroutine_handle<> waiter) noexcept {
        assert(!group->joiner_ && "only one coroutine may join a TaskGroup");
        group->joiner_ = waiter;
      }
      void await_resume() const {
        if (group->error_) std::rethrow_exception(group->error_);
      }
    };
    return Awaiter{this};
  }

 private:
  struct Member {
    struct promise_type {
      Member get_return_object() noexcept { return {}; }
      std::suspend_never initial_suspend() noexcept { return {}; }
      std::suspend_never final_suspend() noexcept { return {}; }
      void return_void() noexcept {}
      void unhandled_exception() noexcept { std::terminate(); }
    };
  };

  // Why the joiner is resumed last: it may destroy the group, which nothing here touches after.
  static Member run_member(TaskGroup* group, Task<void> task) {
    try {
      co_await std::move(task);
    } catch (...) {
      if (!group->error_) group->error_ = std::current_exception();
    }
    if (--group->running_ == 0) {
      if (auto joiner = std::exchange(group->joiner_, {})) joiner.resume();
    }
  }

  std::size_t running_ = 0;
  std::coroutine_handle<> joiner_;
  std::exception_ptr error_;
};

}  // namespace redlimit

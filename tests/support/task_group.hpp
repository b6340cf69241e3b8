#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>
#include <vector>

#include "redlimit/task.hpp"

namespace redlimit::test {

/// Runs tasks concurrently on the calling thread's loop: add() starts a task at once (up to its
/// first suspension); `co_await group.join()` resumes when every added task has ended. The first
/// exception a task let escape is rethrown by join().
class TaskGroup {
 public:
  TaskGroup() = default;
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  void add(Task<void> task) {
    ++running_;
    run_member(this, std::move(task));
  }
  std::size_t running() const { return running_; }

  auto join() {
    struct Awaiter {
      TaskGroup* group;
      bool await_ready() const noexcept { return group->running_ == 0; }
      void await_suspend(std::coroutine_handle<> waiter) noexcept { group->joiner_ = waiter; }
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

}  // namespace redlimit::test

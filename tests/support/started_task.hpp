#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

#include "redlimit/task.hpp"

namespace redlimit::test {

/// Starts a Task at once and keeps it, so a test can let it run up to a suspension and then
/// destroy it mid-flight (the way an owner cancels by destroying).
class StartedTask {
 public:
  struct promise_type {
    bool done = false;
    std::exception_ptr error;
    StartedTask get_return_object() {
      return StartedTask{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept {
      done = true;
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };

  StartedTask(StartedTask&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  ~StartedTask() {
    if (handle_) handle_.destroy();
  }
  bool done() const { return handle_.promise().done; }
  std::exception_ptr error() const { return handle_.promise().error; }

 private:
  explicit StartedTask(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

/// Runs `task` eagerly until it first suspends.
inline StartedTask start(Task<void> task) {
  co_await std::move(task);
}

}  // namespace redlimit::test

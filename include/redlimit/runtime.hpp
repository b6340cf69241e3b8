#pragma once
/// @file runtime.hpp
/// Driving Tasks on a libuv loop: run() for main and tests, spawn() for detached work,
/// sleep_for() for timed waits. Everything runs on the loop's thread.

#include <uv.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <type_traits>

#include "redlimit/task.hpp"

namespace redlimit {

/// Receives the exception of a spawned task that failed.
using ErrorHandler = std::function<void(std::exception_ptr)>;

/// Replaces the handler for exceptions escaping spawned tasks and returns the previous one.
/// An empty handler restores the default, which logs the error at error level on the
/// "redlimit" logger. Process-wide; set it before starting loops.
ErrorHandler set_error_handler(ErrorHandler handler);

/// Starts `task` detached on the next iteration of `loop`. Its exception, if any, goes to the
/// error handler (see set_error_handler); nothing is swallowed. Call on the loop's thread.
void spawn(uv_loop_t* loop, Task<void> task);

/// Suspends for `duration` on a uv timer (rounded up to whole milliseconds, never shorter).
/// A stop request through `stop` ends the wait early with Cancelled; the coroutine is then
/// resumed from the loop, never from inside request_stop(). Request stops on the loop's thread.
Task<void> sleep_for(uv_loop_t* loop, std::chrono::microseconds duration,
                     std::stop_token stop = {});

namespace detail {

/// Marks the current thread as running inside the event loop while it lives.
class LoopScope {
 public:
  LoopScope() noexcept;
  ~LoopScope();
  LoopScope(const LoopScope&) = delete;
  LoopScope& operator=(const LoopScope&) = delete;
  /// True when the calling thread is inside run() or a redlimit callback.
  static bool active() noexcept;
};

/// Throws UsageError, naming `caller`, when called from inside the event loop.
void ensure_outside_loop(const char* caller);

struct DriverState {
  uv_loop_t* loop = nullptr;
  bool done = false;
  bool loop_running = false;
};

/// The coroutine run() drives: it records completion and stops the loop.
class Driver {
 public:
  struct promise_type {
    DriverState* state = nullptr;
    Driver get_return_object() noexcept {
      return Driver{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    auto final_suspend() const noexcept {
      struct Finish {
        bool await_ready() const noexcept { return false; }
        void await_suspend(std::coroutine_handle<promise_type> self) const noexcept {
          DriverState* state = self.promise().state;
          state->done = true;
          if (state->loop_running) uv_stop(state->loop);
        }
        void await_resume() const noexcept {}
      };
      return Finish{};
    }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all
  };

  Driver(Driver&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Driver(const Driver&) = delete;
  ~Driver() {
    if (handle_) handle_.destroy();
  }
  /// Starts the driven task and runs the loop until it ends.
  void run_to_completion(uv_loop_t* loop);

 private:
  explicit Driver(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
  DriverState state_;
};

template <class T>
struct RunResult {
  std::conditional_t<std::is_void_v<T>, std::optional<bool>, std::optional<T>> value;
  std::exception_ptr error;
  T take() {
    if (error) std::rethrow_exception(error);
    if constexpr (!std::is_void_v<T>) return std::move(*value);
  }
};

template <class T>
Driver drive(Task<T> task, RunResult<T>* result) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      result->value.emplace(true);
    } else {
      result->value.emplace(co_await std::move(task));
    }
  } catch (...) {
    result->error = std::current_exception();
  }
}

}  // namespace detail

/// Runs `loop` until `task` ends and returns its value, or rethrows its exception. For main(),
/// tests and examples. Throws UsageError when called from inside the loop (from a coroutine or
/// a redlimit callback), and when the loop runs out of work before the task ends.
template <class T>
T run(uv_loop_t* loop, Task<T> task) {
  detail::ensure_outside_loop("redlimit::run()");
  detail::RunResult<T> result;
  detail::Driver driver = detail::drive<T>(std::move(task), &result);
  driver.run_to_completion(loop);
  return result.take();
}

}  // namespace redlimit

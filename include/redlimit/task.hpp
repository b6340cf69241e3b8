#pragma once
/// @file task.hpp
/// Task<T>: a lazy, move-only coroutine whose result or exception goes to its awaiter.

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace redlimit {

template <class T = void>
class Task;

namespace detail {

/// Memory for coroutine frames: blocks of a few size classes are kept per thread and reused, so
/// that a steady stream of calls allocates nothing once warm. Larger frames, and every frame
/// under AddressSanitizer (which must see each frame's lifetime), use operator new.
void* allocate_frame(std::size_t size);
/// Gives back a block from allocate_frame(size), with the same size, on any thread.
void free_frame(void* frame, std::size_t size) noexcept;
/// allocate_frame() for a coroutine's frame, counted per thread (what a call costs in frames).
void* allocate_coroutine_frame(std::size_t size);

/// What every Task promise shares: the awaiting coroutine and the inline-completion handshake.
///
/// Why: g++ 12 does not turn symmetric transfer into a tail call at -O0 or under ASan, so a loop
/// of synchronously completing co_awaits would grow the stack without bound. The awaiter starts
/// the child with an ordinary resume(); if the child finishes before resume() returns, the final
/// awaiter hands control back by returning (not by transfer) and the awaiter continues without
/// suspending. Only children that really suspended use symmetric transfer to resume the caller.
class TaskPromiseBase {
 public:
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      TaskPromiseBase& promise = self.promise();
      if (promise.started_inline_) {
        promise.completed_inline_ = true;
        return std::noop_coroutine();
      }
      return promise.continuation_;
    }
    void await_resume() const noexcept {}
  };

  static void* operator new(std::size_t size) { return allocate_coroutine_frame(size); }
  static void operator delete(void* frame, std::size_t size) noexcept { free_frame(frame, size); }

  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  /// Runs the coroutine `self` (this promise's) until it first suspends or ends, with
  /// `continuation` to be resumed when it ends later. Returns true if it already ended.
  bool start(std::coroutine_handle<> self, std::coroutine_handle<> continuation) {
    continuation_ = continuation;
    started_inline_ = true;
    self.resume();
    started_inline_ = false;
    return completed_inline_;
  }

 protected:
  void rethrow_if_failed() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  std::coroutine_handle<> continuation_ = std::noop_coroutine();
  std::exception_ptr exception_;
  bool started_inline_ = false;
  bool completed_inline_ = false;
};

template <class T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept;
  template <class U = T>
  requires std::is_convertible_v<U&&, T>
  void return_value(U&& value) { value_.emplace(std::forward<U>(value)); }
  T take_result() {
    rethrow_if_failed();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take_result() { rethrow_if_failed(); }
};

}  // namespace detail

/// A lazy coroutine producing a T. It starts when awaited (`co_await std::move(task)` or
/// `co_await make_task()`), runs on the awaiter's thread, and delivers its value or rethrows its
/// exception in the awaiter. Move-only; destroying a Task destroys its coroutine frame, also one
/// that is suspended (which cancels whatever it waits for).
///
/// Parameters of Task coroutines are taken by value: a lazy coroutine that holds a reference to
/// a temporary reads it after the temporary is gone. The library's exceptions take a reference
/// only where the caller co_awaits the task at once, and say so.
template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  /// True until the task has been moved from.
  bool valid() const noexcept { return static_cast<bool>(handle_); }

  class Awaiter {
   public:
    explicit Awaiter(Handle handle) noexcept : handle_(handle) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) {
      return !handle_.promise().start(handle_, caller);
    }
    T await_resume() { return handle_.promise().take_result(); }

   private:
    Handle handle_;
  };

  /// Awaiting consumes the task: `co_await std::move(task)`.
  Awaiter operator co_await() && noexcept {
    assert(handle_ && "co_await on an empty Task");
    return Awaiter{handle_};
  }

 private:
  friend class detail::TaskPromise<T>;
  explicit Task(Handle handle) noexcept : handle_(handle) {}
  Handle handle_;
};

namespace detail {

template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>{Task<T>::Handle::from_promise(*this)};
}

inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>{Task<void>::Handle::from_promise(*this)};
}

}  // namespace detail
}  // namespace redlimit

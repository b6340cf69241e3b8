#include <memory>
#include <mutex>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/logger.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit {
namespace {

std::mutex handler_mutex;
ErrorHandler error_handler;  // guarded by handler_mutex; empty means "log it"

void log_error(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    detail::default_logger()->error("a spawned task failed: {}", e.what());
  } catch (...) {
    detail::default_logger()->error("a spawned task failed with a non-standard exception");
  }
}

/// A fire-and-forget coroutine: created suspended, destroys itself when it ends.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept {
      return Detached{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches all
  };
  std::coroutine_handle<promise_type> handle;
};

Detached run_detached(Task<void> task) {
  try {
    co_await std::move(task);
  } catch (...) {
    detail::report_error(std::current_exception());
  }
}

/// What starts a spawned coroutine: a 0 ms timer, so that it starts on the next iteration.
struct Start {
  detail::UvHandle<uv_timer_t> timer;
  std::coroutine_handle<> coroutine;
};

void on_start(uv_timer_t* timer) {
  auto* start = static_cast<Start*>(timer->data);
  const std::coroutine_handle<> coroutine = start->coroutine;
  delete start;  // closes the timer, which is freed a loop iteration later
  detail::LoopScope scope;
  coroutine.resume();
}

}  // namespace

namespace detail {

void report_error(std::exception_ptr error) {
  ErrorHandler handler;
  {
    std::lock_guard lock(handler_mutex);
    handler = error_handler;
  }
  if (!handler) return log_error(error);
  try {
    handler(error);
  } catch (...) {
    log_error(std::current_exception());
  }
}

}  // namespace detail

ErrorHandler set_error_handler(ErrorHandler handler) {
  std::lock_guard lock(handler_mutex);
  return std::exchange(error_handler, std::move(handler));
}

void spawn(uv_loop_t* loop, Task<void> task) {
  auto start = std::make_unique<Start>();
  start->coroutine = run_detached(std::move(task)).handle;
  try {
    start->timer.init(loop, &uv_timer_init);
  } catch (...) {
    start->coroutine.destroy();
    throw;
  }
  Start* const started = start.release();  // freed by on_start
  started->timer.get()->data = started;
  uv_timer_start(started->timer.get(), on_start, 0, 0);
}

}  // namespace redlimit

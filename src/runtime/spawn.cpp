#include <mutex>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/logger.hpp"

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

/// Why: the timer lives on the heap and is freed in its close callback, after the coroutine
/// has been started, so nothing of it is left in any coroutine frame.
struct StartTimer {
  uv_timer_t timer;
  std::coroutine_handle<> coroutine;
};

void on_start(uv_timer_t* timer) {
  auto* start = static_cast<StartTimer*>(timer->data);
  uv_close(reinterpret_cast<uv_handle_t*>(timer),
           [](uv_handle_t* handle) { delete static_cast<StartTimer*>(handle->data); });
  detail::LoopScope scope;
  start->coroutine.resume();
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
  auto coroutine = run_detached(std::move(task)).handle;
  auto* start = new StartTimer{{}, coroutine};
  if (uv_timer_init(loop, &start->timer) != 0) {
    delete start;
    coroutine.destroy();
    throw Error("spawn: uv_timer_init failed");
  }
  start->timer.data = start;
  uv_timer_start(&start->timer, on_start, 0, 0);
}

}  // namespace redlimit

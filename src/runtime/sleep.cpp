#include <optional>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit {
namespace {

/// Why: a uv handle must outlive its close callback, which runs a loop iteration after
/// uv_close(), so the timer lives on the heap and frees itself; the awaiter only points to it.
struct SleepTimer {
  uv_timer_t timer;
  std::coroutine_handle<> waiter;
  bool cancelled = false;
};

void on_fire(uv_timer_t* timer) {
  auto* state = static_cast<SleepTimer*>(timer->data);
  detail::LoopScope scope;
  if (auto waiter = std::exchange(state->waiter, {})) waiter.resume();
}

std::uint64_t whole_milliseconds(std::chrono::microseconds duration) {
  const auto us = duration.count();
  if (us <= 0) return 0;
  return static_cast<std::uint64_t>(us / 1000 + (us % 1000 != 0 ? 1 : 0));
}

class SleepAwaiter {
 public:
  SleepAwaiter(uv_loop_t* loop, std::chrono::microseconds duration, std::stop_token stop)
      : loop_(loop), duration_(duration), stop_(std::move(stop)) {}
  SleepAwaiter(const SleepAwaiter&) = delete;
  SleepAwaiter& operator=(const SleepAwaiter&) = delete;
  ~SleepAwaiter() { release(); }

  bool await_ready() const noexcept { return stop_.stop_requested(); }

  void await_suspend(std::coroutine_handle<> waiter) {
    auto* state = new SleepTimer;
    if (uv_timer_init(loop_, &state->timer) != 0) {
      delete state;
      throw Error("sleep_for: uv_timer_init failed");
    }
    state->timer.data = state;
    state->waiter = waiter;
    state_ = state;
    uv_update_time(loop_);  // uv_timer_start counts from the loop's cached time
    uv_timer_start(&state->timer, on_fire, whole_milliseconds(duration_), 0);
    // Why last: the stop_callback constructor runs OnStop at once if stop was already requested.
    on_stop_.emplace(stop_, OnStop{state});
  }

  void await_resume() {
    const bool cancelled = state_ == nullptr || state_->cancelled;
    release();
    if (cancelled) throw Cancelled("sleep_for cancelled");
  }

 private:
  /// Never resumes inline: re-arms the timer to fire on the next loop iteration.
  struct OnStop {
    SleepTimer* state;
    void operator()() const noexcept {
      if (!state->waiter) return;
      state->cancelled = true;
      uv_timer_start(&state->timer, on_fire, 0, 0);
    }
  };

  void release() noexcept {
    on_stop_.reset();
    if (auto* state = std::exchange(state_, nullptr)) {
      state->waiter = {};
      uv_timer_stop(&state->timer);
      uv_close(reinterpret_cast<uv_handle_t*>(&state->timer),
               [](uv_handle_t* handle) { delete static_cast<SleepTimer*>(handle->data); });
    }
  }

  uv_loop_t* loop_;
  std::chrono::microseconds duration_;
  std::stop_token stop_;
  SleepTimer* state_ = nullptr;
  std::optional<std::stop_callback<OnStop>> on_stop_;
};

}  // namespace

Task<void> sleep_for(uv_loop_t* loop, std::chrono::microseconds duration, std::stop_token stop) {
  co_await SleepAwaiter(loop, duration, std::move(stop));
}

}  // namespace redlimit

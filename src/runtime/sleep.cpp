#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit {
namespace {

/// The timeout for uv_timer_start() that fires no sooner than `duration` from now, on a loop
/// whose time was just updated.
///
/// Why not just `duration` rounded up: the loop's time is the monotonic clock (or its coarse
/// variant, a tick behind) cut down to whole milliseconds, so it runs behind; a timer is due
/// once that time reaches its start plus its timeout, which a loop woken by other work sees up
/// to about 2 ms early. So the timeout counts from the loop's time to the first whole
/// millisecond at or after now + duration.
std::uint64_t timeout_ms(uv_loop_t* loop, std::chrono::microseconds duration) {
  constexpr std::uint64_t ns_per_ms = 1'000'000;
  const auto us = duration.count();
  if (us <= 0) return 0;
  // Why a cap: uv_hrtime() plus the longest duration would overflow; a wait past it (about
  // 290 years) never ends either way.
  constexpr std::uint64_t longest_us = std::numeric_limits<std::uint64_t>::max() / 2000;
  const std::uint64_t wait_ns = std::min(static_cast<std::uint64_t>(us), longest_us) * 1000;
  const std::uint64_t due_ms = (uv_hrtime() + wait_ns + ns_per_ms - 1) / ns_per_ms;
  const std::uint64_t loop_ms = uv_now(loop);
  return due_ms > loop_ms ? due_ms - loop_ms : 0;
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
    // Why the awaiter is the timer's data: it lives in the suspended frame, and a frame
    // destroyed while sleeping closes the timer first (release()), so no event outlives it.
    timer_.init(loop_, &uv_timer_init);
    timer_.get()->data = this;
    waiter_ = waiter;
    uv_update_time(loop_);  // uv_timer_start counts from the loop's cached time
    uv_timer_start(timer_.get(), &on_fire, timeout_ms(loop_, duration_), 0);
    // Why last: the stop_callback constructor runs OnStop at once if stop was already requested.
    on_stop_.emplace(stop_, OnStop{this});
  }

  void await_resume() {
    // Why a closed timer means cancelled: it never suspended (stop was requested before).
    const bool cancelled = cancelled_ || !timer_.is_open();
    release();
    if (cancelled) throw Cancelled("sleep_for cancelled");
  }

 private:
  /// Never resumes inline: re-arms the timer to fire on the next loop iteration.
  struct OnStop {
    SleepAwaiter* awaiter;
    void operator()() const noexcept {
      if (!awaiter->waiter_) return;
      awaiter->cancelled_ = true;
      uv_timer_start(awaiter->timer_.get(), &on_fire, 0, 0);
    }
  };

  static void on_fire(uv_timer_t* timer) {
    auto* self = static_cast<SleepAwaiter*>(timer->data);
    detail::LoopScope scope;
    if (auto waiter = std::exchange(self->waiter_, {})) waiter.resume();
  }

  void release() noexcept {
    on_stop_.reset();
    waiter_ = {};
    timer_.close();
  }

  uv_loop_t* loop_;
  std::chrono::microseconds duration_;
  std::stop_token stop_;
  detail::UvHandle<uv_timer_t> timer_;
  std::coroutine_handle<> waiter_;
  bool cancelled_ = false;
  std::optional<std::stop_callback<OnStop>> on_stop_;
};

}  // namespace

Task<void> sleep_for(uv_loop_t* loop, std::chrono::microseconds duration, std::stop_token stop) {
  co_await SleepAwaiter(loop, duration, std::move(stop));
}

}  // namespace redlimit

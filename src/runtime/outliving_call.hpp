#pragma once

#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "redlimit/task.hpp"
#include "runtime/background_tasks.hpp"

namespace redlimit::detail {

/// What a call that outlives its caller and the caller's wait share.
template <typename T>
struct OutlivingState {
  std::optional<T> result;
  std::exception_ptr error;
  bool ended = false;
  bool abandoned = false;          ///< the awaiting frame was destroyed before the call ended
  std::coroutine_handle<> waiter;  ///< null when nobody waits
};

/// What is done with the outcome of a call whose caller is gone: its result, or its error (a
/// call that timed out may have run).
template <typename T>
using Orphaned = std::function<Task<void>(std::optional<T> result, std::exception_ptr error)>;

/// Runs `call` to its end; hands its outcome to the waiter, or, when the waiter is gone, to
/// `orphaned`.
template <typename T>
Task<void> carry_on(Task<T> call, std::shared_ptr<OutlivingState<T>> state, Orphaned<T> orphaned) {
  try {
    state->result.emplace(co_await std::move(call));
  } catch (...) {
    state->error = std::current_exception();
  }
  state->ended = true;
  if (state->abandoned) {
    co_await orphaned(std::move(state->result), state->error);
    co_return;
  }
  if (auto waiter = std::exchange(state->waiter, {})) waiter.resume();
}

/// `co_await` of the shared outcome; destroyed with a frame that still waits, it tells the call
/// that its caller is gone.
template <typename T>
class OutlivingWait {
 public:
  explicit OutlivingWait(std::shared_ptr<OutlivingState<T>> state) : state_(std::move(state)) {}
  OutlivingWait(const OutlivingWait&) = delete;
  OutlivingWait& operator=(const OutlivingWait&) = delete;
  ~OutlivingWait() {
    if (state_->ended) return;
    state_->abandoned = true;
    state_->waiter = {};
  }
  bool await_ready() const noexcept { return state_->ended; }
  void await_suspend(std::coroutine_handle<> waiter) noexcept { state_->waiter = waiter; }
  void await_resume() const noexcept {}

 private:
  std::shared_ptr<OutlivingState<T>> state_;
};

/// `call`'s result, as `co_await call` gives it, from a call that outlives its caller: it runs
/// as a task of `tasks` (so Client::close() waits for it), and if the awaiting frame is
/// destroyed before it ends, `orphaned` gets its outcome (a reservation whose reply nobody would
/// hear is given back). Once `tasks` accepts no more, the call runs as `co_await call` would.
template <typename T>
Task<T> outliving(BackgroundTasks& tasks, Task<T> call, Orphaned<T> orphaned) {
  if (!tasks.accepting()) co_return co_await std::move(call);
  auto state = std::make_shared<OutlivingState<T>>();
  tasks.start_now(carry_on(std::move(call), state, std::move(orphaned)));
  co_await OutlivingWait<T>(state);
  if (state->error) std::rethrow_exception(state->error);
  co_return std::move(*state->result);
}

}  // namespace redlimit::detail

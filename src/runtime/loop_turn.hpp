#pragma once

#include <uv.h>

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <thread>

#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

/// Keeps answers made without I/O (the deny cache, a failure policy while the circuit breaker is
/// open, the local fallback, an in-process backend) from holding the loop: a caller that asks
/// again at once never suspends, and without this one such caller could keep libuv from reading
/// replies and running timers for as long as it loops (issue 15, bug 1).
///
/// `co_await turn.yield_if_due()` continues at once while the loop's current turn has lasted
/// less than the budget; once it has lasted longer, the caller is resumed by the loop (from an
/// idle handle): the loop first finishes what it was doing and runs the timers that are due, and
/// polls for I/O, without blocking, right after the resumed callers' turn. A turn starts with the
/// first call after the loop's time moved on (libuv updates it at the start of every iteration
/// and after every poll); within a turn the clock is read every 16th call, so checking costs
/// little and no handle; a handle is open only while callers wait to be resumed.
class LoopTurn {
 public:
  static constexpr std::chrono::microseconds default_budget{1000};
  /// Within a turn, the clock is read on every this many calls.
  static constexpr int calls_per_check = 16;

  explicit LoopTurn(uv_loop_t* loop, std::chrono::microseconds budget = default_budget) noexcept
      : loop_(loop), budget_ns_(static_cast<std::uint64_t>(budget.count()) * 1000) {}
  ~LoopTurn() { *alive_ = false; }
  LoopTurn(const LoopTurn&) = delete;
  LoopTurn& operator=(const LoopTurn&) = delete;

  class [[nodiscard]] Yield {
   public:
    explicit Yield(LoopTurn& turn) noexcept : turn_(turn) {}
    Yield(const Yield&) = delete;
    Yield& operator=(const Yield&) = delete;
    /// Why: a frame destroyed while it waits must not be resumed.
    ~Yield() { turn_.unlink(this); }

    // Why the thread: a call from another thread (a UsageError the layers below raise) must
    // not touch the loop's handles.
    bool await_ready() noexcept {
      return !turn_.due() || std::this_thread::get_id() != turn_.owner_thread_;
    }
    void await_suspend(std::coroutine_handle<> waiter) {
      waiter_ = waiter;
      turn_.enqueue(this);
    }
    void await_resume() const noexcept {}

   private:
    friend class LoopTurn;
    LoopTurn& turn_;
    std::coroutine_handle<> waiter_;
    Yield* next_ = nullptr;
    Yield* previous_ = nullptr;
    std::uint64_t round_ = 0;  ///< the round of resumptions that resumes it
    bool queued_ = false;
  };

  /// Awaitable: see the class comment.
  Yield yield_if_due() noexcept { return Yield(*this); }

 private:
  /// Whether the current turn has lasted the budget; starts a turn when the loop moved on.
  bool due() noexcept {
    const std::uint64_t loop_time = uv_now(loop_);
    if (loop_time != turn_loop_time_) {
      turn_loop_time_ = loop_time;
      turn_started_ns_ = uv_hrtime();
      unchecked_ = 0;
      return false;
    }
    // Why not the clock every time: a clock reading costs as much as a tenth of an answer from
    // the deny cache, and a few answers more or less per turn do not matter.
    if (++unchecked_ < calls_per_check) return false;
    unchecked_ = 0;
    return uv_hrtime() - turn_started_ns_ >= budget_ns_;
  }
  void enqueue(Yield* waiter);
  void unlink(Yield* waiter) noexcept;
  static void on_idle(void* self);

  uv_loop_t* loop_;
  std::uint64_t budget_ns_;
  std::thread::id owner_thread_ = std::this_thread::get_id();  ///< the loop's
  std::uint64_t turn_loop_time_ = 0;  ///< uv_now() when the current turn started
  std::uint64_t turn_started_ns_ = 0;
  int unchecked_ = 0;       ///< calls in this turn since the clock was read
  Yield* first_ = nullptr;  ///< callers waiting for the next iteration, in order
  Yield* last_ = nullptr;
  std::uint64_t round_ = 1;  ///< counts the rounds of resumptions (on_idle calls)
  /// Why: resuming the last caller may end the call that kept this object's owner alive.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Why opened only while callers wait, and closed before they are resumed: an owner without a
  // close() (a Limiter) may be destroyed right before uv_loop_close(), which must find no handle.
  std::unique_ptr<Idle> idle_;
};

}  // namespace redlimit::detail

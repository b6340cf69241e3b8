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
/// polls for I/O, without blocking, right after the resumed callers' turn. While callers wait to
/// be resumed, every later caller waits behind them, so calls keep their order. A turn starts with
/// the first call after the loop's time moved on (libuv updates it at the start of every
/// iteration and after every poll); within a turn the clock is read every 16th call, so checking
/// costs little and no handle; a handle is open only while callers wait to be resumed.
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

    // Why the thread first: a call from another thread (a UsageError the layers below raise)
    // must not touch the loop or this object's turn.
    bool await_ready() noexcept { return !turn_.on_loop_thread() || !turn_.due(); }
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

  /// The thread that runs the loop, where the owner knows it (a client's dispatcher, which
  /// refuses calls from any other). Otherwise it is the thread of the first call.
  void bind_to(std::thread::id loop_thread) noexcept { loop_thread_ = loop_thread; }

 private:
  /// Whether the caller runs on the loop's thread; latches it at the first call if unbound.
  // Why the first call is sound: an owner without a dispatcher (an in-process limiter or
  // semaphore) keeps unsynchronised state, so every call to it runs on the loop's thread; the
  // thread that built it may be another (uv_run on a thread of its own).
  bool on_loop_thread() noexcept {
    const std::thread::id caller = std::this_thread::get_id();
    if (loop_thread_ == std::thread::id{}) loop_thread_ = caller;
    return caller == loop_thread_;
  }
  /// Whether the current turn has lasted the budget; starts a turn when the loop moved on.
  bool due() noexcept {
    // Why first: a caller that yielded is resumed in order with the ones behind it; a later
    // caller that went on at once would overtake it (a waiter would lose its place in the queue).
    // Why not while resuming: the callers resumed then would find the rest of their round
    // queued, yield again, and from then on get one answer per loop iteration.
    if (first_ != nullptr && !resuming_) return true;
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
  std::thread::id loop_thread_{};     ///< none until bound or latched
  std::uint64_t turn_loop_time_ = 0;  ///< uv_now() when the current turn started
  std::uint64_t turn_started_ns_ = 0;
  int unchecked_ = 0;       ///< calls in this turn since the clock was read
  Yield* first_ = nullptr;  ///< callers waiting for the next iteration, in order
  Yield* last_ = nullptr;
  std::uint64_t round_ = 1;  ///< counts the rounds of resumptions (on_idle calls)
  bool resuming_ = false;    ///< on_idle() is resuming a round
  /// Why: resuming the last caller may end the call that kept this object's owner alive.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Why opened only while callers wait, and closed before they are resumed: an owner without a
  // close() (a Limiter) may be destroyed right before uv_loop_close(), which must find no handle.
  std::unique_ptr<Idle> idle_;
};

}  // namespace redlimit::detail

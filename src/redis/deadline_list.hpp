#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>

#include "redis/command_op.hpp"
#include "runtime/close_latch.hpp"
#include "runtime/uv_handles.hpp"

namespace redlimit::detail {

/// The commands of one connection that wait for a connection or a reply, ordered by deadline,
/// and the timer that fires when the earliest deadline passes. The list is intrusive (through
/// CommandOp::earlier and later): inserting, which nearly always appends (one command timeout
/// for every command), and removing cost no allocation.
class DeadlineList {
 public:
  using Clock = CommandOp::Clock;

  /// `on_due(owner)` runs on the loop when the earliest deadline has passed; it should take
  /// every expired command out (expired()), then call arm().
  DeadlineList(uv_loop_t* loop, Timer::Callback on_due, void* owner, CloseLatch* latch)
      : timer_(loop, on_due, owner, latch) {}

  /// Adds `op`, by its deadline.
  void insert(CommandOp* op) noexcept {
    CommandOp* before = latest_;
    while (before != nullptr && before->deadline > op->deadline)
      before = before->earlier;
    op->earlier = before;
    op->later = before != nullptr ? before->later : earliest_;
    if (op->later != nullptr) {
      op->later->earlier = op;
    } else {
      latest_ = op;
    }
    if (before != nullptr) {
      before->later = op;
    } else {
      earliest_ = op;
    }
  }
  /// Takes `op` out (a no-op for one not in the list).
  void erase(CommandOp* op) noexcept {
    if (op->earlier != nullptr) {
      op->earlier->later = op->later;
    } else if (earliest_ == op) {
      earliest_ = op->later;
    }
    if (op->later != nullptr) {
      op->later->earlier = op->earlier;
    } else if (latest_ == op) {
      latest_ = op->earlier;
    }
    op->earlier = op->later = nullptr;
  }
  /// The earliest command whose deadline is at or before `now`, or null.
  CommandOp* expired(Clock::time_point now) const noexcept {
    return earliest_ != nullptr && earliest_->deadline <= now ? earliest_ : nullptr;
  }
  /// Starts the timer for the earliest deadline, unless it already fires by then.
  void arm() {
    if (earliest_ == nullptr) return;
    const auto due = earliest_->deadline;
    if (timer_.active() && timer_due_ <= due) return;
    timer_due_ = due;
    timer_.start(milliseconds_until(due));
  }
  /// Tells every command in the list that its connection is gone (op->connection = null).
  void orphan_all() noexcept {
    for (CommandOp* op = earliest_; op != nullptr; op = op->later)
      op->connection = nullptr;
  }
  void close() noexcept { timer_.close(); }

 private:
  /// Whole milliseconds from now until `due`, rounded up; 0 once it has passed.
  static std::uint64_t milliseconds_until(Clock::time_point due) {
    const auto left = due - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
  }

  Timer timer_;
  CommandOp* earliest_ = nullptr;  ///< head
  CommandOp* latest_ = nullptr;    ///< tail
  Clock::time_point timer_due_{};
};

}  // namespace redlimit::detail

#pragma once

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "redlimit/task.hpp"
#include "runtime/uv_handle.hpp"

namespace redlimit::detail {

class BackgroundTasks;
class Connection;

/// One `WAIT replicas timeout` on a connection and the script calls it covers: those sent on
/// the connection after the WAIT before it and up to it. Its answer, once done(): the replicas
/// that acknowledged, or the error the WAIT failed with.
class WaitRound {
 public:
  using Clock = std::chrono::steady_clock;

  /// `co_await round.answered()`: resumes once the round is done. The awaiter lives in the
  /// awaiting frame; destroyed first (the frame went), it is never resumed.
  class Answered {
   public:
    explicit Answered(WaitRound& round) noexcept : round_(round) {}
    ~Answered();
    Answered(const Answered&) = delete;
    Answered& operator=(const Answered&) = delete;
    bool await_ready() const noexcept { return round_.done_; }
    void await_suspend(std::coroutine_handle<> waiter);
    void await_resume() const noexcept {}
    /// Resumes the awaiting frame: by its round, once, when the round is done.
    void wake() noexcept {
      waiting_ = false;
      waiter_.resume();
    }

   private:
    WaitRound& round_;
    std::coroutine_handle<> waiter_;
    std::size_t index_ = 0;
    bool waiting_ = false;
  };

  Answered answered() noexcept { return Answered(*this); }
  bool done() const noexcept { return done_; }
  /// Replicas that acknowledged (when done without error).
  std::int64_t acknowledged() const noexcept { return acknowledged_; }
  /// Why the WAIT failed (null when it answered).
  const std::exception_ptr& error() const noexcept { return error_; }
  /// The timeout the WAIT named (once sent).
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  // ---- driven by ReplicaWaits
  /// The earliest deadline of the calls it covers.
  Clock::time_point deadline() const noexcept { return deadline_; }
  /// It covers a call due by `deadline` too.
  void cover(Clock::time_point deadline) noexcept { deadline_ = std::min(deadline_, deadline); }
  /// Its WAIT goes with `timeout`.
  void send_with(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }
  /// Records the answer and resumes every waiter.
  void finish(std::int64_t acknowledged, std::exception_ptr error);

 private:
  Clock::time_point deadline_ = Clock::time_point::max();  ///< the earliest of its calls'
  std::chrono::milliseconds timeout_{};
  std::int64_t acknowledged_ = 0;
  std::exception_ptr error_;
  bool done_ = false;
  std::vector<Answered*> waiters_;  ///< null where an awaiter went
};

/// The WAITs of one connection (ClientOptions::replicas). At most one WAIT is in flight on the
/// connection: a WAIT blocks its connection on the server until the replicas answer or its
/// timeout passes, so WAITs sent back to back would block it one timeout each when a replica
/// is down. A script call sent while none is in flight is followed at once by its own WAIT,
/// pipelined behind it; calls sent while one is in flight share the next WAIT, sent as soon
/// as that one is answered. A round still unanswered at the earliest deadline of its calls
/// ends then for them (TimeoutError, maybe executed), while its WAIT goes on on the connection:
/// the WAIT command may take its timeout plus a command timeout before the connection counts
/// as lost, and the calls are due by their own deadlines.
class ReplicaWaits {
 public:
  using Clock = std::chrono::steady_clock;

  /// `connection` and `tasks` (where a round's WAIT is awaited) must outlive this object, which
  /// lives on `loop`; `command_timeout` bounds how long a WAIT may take past its timeout
  /// before the connection counts as lost.
  ReplicaWaits(uv_loop_t* loop, Connection& connection, BackgroundTasks& tasks, int replicas,
               std::chrono::milliseconds replica_timeout,
               std::chrono::milliseconds command_timeout);
  ~ReplicaWaits() { *alive_ = false; }
  ReplicaWaits(const ReplicaWaits&) = delete;
  ReplicaWaits& operator=(const ReplicaWaits&) = delete;

  /// Call right after a script call with `deadline` was sent on the connection: the round whose
  /// WAIT covers it. Its timeout is at most replica_timeout, and within half of what is left
  /// until the earliest deadline of its calls when it is sent.
  std::shared_ptr<WaitRound> cover(Clock::time_point deadline);

 private:
  /// Sends the WAIT of `round`, and of each next round, until none is due.
  Task<void> run(std::shared_ptr<WaitRound> round);
  /// The deadline of the round whose WAIT is in flight passed: its calls end.
  static void on_overdue(uv_timer_t* timer);

  Connection& connection_;
  BackgroundTasks& tasks_;
  int replicas_;
  std::chrono::milliseconds replica_timeout_;
  std::chrono::milliseconds command_timeout_;
  bool in_flight_ = false;
  std::shared_ptr<WaitRound> next_;  ///< calls sent while a WAIT is in flight
  WaitRound* sent_ = nullptr;        ///< the round whose WAIT is in flight (run() holds it)
  UvHandle<uv_timer_t> overdue_;     ///< fires at sent_'s deadline
  /// Why: a caller resumed by a round may close the client, and this object with it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace redlimit::detail

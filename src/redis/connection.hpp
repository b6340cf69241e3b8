#pragma once

#include <hiredis/async.h>
#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/command_op.hpp"
#include "redis/deadline_list.hpp"
#include "redis/endpoint.hpp"
#include "redis/pending_count.hpp"
#include "redis/session.hpp"
#include "redlimit/task.hpp"
#include "runtime/completion.hpp"
#include "runtime/ready_queue.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

class CircuitBreaker;
class ReplicaWaits;

/// One hiredis async context to one Redis server, on one loop, kept connected.
///
/// Every command completes exactly once, by its deadline: with the reply, or with
/// ConnectionError, TimeoutError, Overloaded or UsageError (after close). Replies resume their
/// coroutine inline from the read callback; every other completion is resumed from the loop
/// through the ready queue, never from inside hiredis or a timer sweep.
///
/// Its Session connects, reconnects and closes (see its states). Commands wait in the queue
/// while connecting and fail fast in backoff; the DeadlineList fails those whose deadline
/// passes.
class Connection final : private SessionEvents {
 public:
  using Clock = std::chrono::steady_clock;

  /// `name`: the server's name in logs and errors (and its circuit breaker's key); empty:
  /// endpoint.display(). A connection whose server is found (ConnectionSettings::
  /// endpoint_source) names what it stands for instead, as the server may change.
  Connection(uv_loop_t* loop, Endpoint endpoint, ConnectionSettings settings,
             std::shared_ptr<spdlog::logger> logger, std::string name = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Sends `argv` (copied before this returns) and returns the awaiter of the outcome. A
  /// `follow_up` completes a command this connection ran (the EVAL after an EVALSHA met
  /// NOSCRIPT): close() waiting for the commands in flight takes it too.
  CommandAwaiter send(std::span<const std::string_view> argv, Clock::time_point deadline,
                      bool follow_up = false) {
    return send(argv, deadline, Clock::now(), 1, false, follow_up);
  }
  /// Sends ASKING and then `argv`, back to back: the awaiters of both outcomes. ASKING is only
  /// sent if `argv` will be too (ASKING alone would apply to another caller's command).
  std::pair<CommandAwaiter, CommandAwaiter> send_asking(std::span<const std::string_view> argv,
                                                        Clock::time_point deadline,
                                                        bool follow_up = false);

  /// Fails queued commands, waits for those in flight (and their follow-ups), disconnects,
  /// closes every handle. A call while another is under way waits for that one.
  Task<void> close();

  /// The sequence number the next command sent will get.
  std::uint64_t next_sequence() const noexcept { return sequence_ + 1; }
  /// Commands waiting for a connection or a reply.
  std::size_t pending() const noexcept { return pending_.value(); }
  const Endpoint& endpoint() const noexcept { return session_.endpoint(); }
  /// endpoint().display(), made once: the server's name for logs and per-server state.
  const std::string& name() const noexcept { return name_; }
  /// False once close() has begun: commands sent now fail with UsageError (follow-ups of
  /// commands in flight excepted, see send()).
  bool accepting() const noexcept { return session_.accepting(); }
  /// True once close() has finished.
  bool closed() const noexcept { return session_.state() == Session::State::closed; }
  /// True while its server is known to be unreachable: the last attempt to connect failed and
  /// the next one waits, or its circuit breaker is open.
  bool known_down() const noexcept;
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return session_.logger(); }

  /// True if an EVAL of script `index` was sent on this connection after the command with
  /// send sequence `sequence` (so an EVALSHA sent now runs after it and finds the script).
  bool script_loaded_after(std::size_t index, std::uint64_t sequence) const noexcept {
    return index < script_loads_.size() && script_loads_[index] > sequence;
  }
  /// Records that an EVAL of script `index` is about to be sent.
  void note_script_load(std::size_t index) {
    if (script_loads_.size() <= index) script_loads_.resize(index + 1, 0);
    script_loads_[index] = next_sequence();
  }
  /// True if an EVAL of script `index` went out on this connection since it last connected
  /// and since forget_scripts(): an EVALSHA of it sent now finds the script, unless the
  /// server forgets it meanwhile (SCRIPT FLUSH).
  bool script_known(std::size_t index) const noexcept {
    return index < script_loads_.size() && script_loads_[index] > scripts_forgotten_at_;
  }
  /// The server answered NOSCRIPT: it forgot every script (a restart, a failover, SCRIPT FLUSH).
  void forget_scripts() noexcept { scripts_forgotten_at_ = sequence_; }

  /// The circuit breaker of this connection's server (owned by the dispatcher, which outlives
  /// the connection and keeps it when the connection is replaced); null until attached.
  CircuitBreaker* breaker() const noexcept { return breaker_; }
  void attach_breaker(CircuitBreaker* breaker) noexcept { breaker_ = breaker; }
  /// The WAITs of this connection (ClientOptions::replicas); null until attached.
  ReplicaWaits* replica_waits() const noexcept { return replica_waits_.get(); }
  void attach_replica_waits(std::unique_ptr<ReplicaWaits> waits);

  /// Internal: the awaiter gives up on `op` (its frame was destroyed).
  void abandon(CommandOp* op) noexcept;

 private:
  // Session events
  void session_ready() override;
  void session_failed(const std::exception_ptr& error) override;
  void session_lost(const std::string&) override {}  // in-flight commands got NULL replies

  // hiredis, timer and ready-queue callbacks (static: they call plain functions)
  static void on_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_deadline(void* self);
  static void resume_op(void* op);
  static void resume_closer(void* self);

  /// send() as of `now`, refused (Overloaded) unless `room` commands fit under max_pending;
  /// `asking` for the ASKING before a command.
  CommandAwaiter send(std::span<const std::string_view> argv, Clock::time_point deadline,
                      Clock::time_point now, std::size_t room, bool asking, bool follow_up);
  bool dispatch(CommandOp* op, std::span<const std::string_view> argv);
  void complete(CommandOp* op, std::exception_ptr error);
  void complete_inline(CommandOp* op, Reply reply);
  void finish(CommandOp* op);
  /// What a command in flight gets when hiredis ends its connection (`context`) before its
  /// reply: the oldest one, whose reply was not RESP, a ProtocolError; the others (and every
  /// one after a loss) a ConnectionError, maybe executed.
  std::exception_ptr lost_before_reply(const redisAsyncContext* context);
  void fail_queued(const std::exception_ptr& error);
  void expire_deadlines();
  /// Reads the replies that reached the socket, when a command in flight is past its deadline.
  void read_arrived_replies();
  void notify_if_drained();

  std::size_t max_pending_;
  RedisMetrics* metrics_;  ///< null: counts nowhere
  Session session_;
  std::string name_;
  DeadlineList deadlines_;  ///< after session_: its timer reports to the session's latch
  ReadyQueue ready_;
  std::uint64_t sequence_ = 0;
  std::vector<std::uint64_t> script_loads_;  ///< per script: sequence of its last EVAL
  /// The sequence when the server was last connected or found without a script: loads up to
  /// it may be gone.
  std::uint64_t scripts_forgotten_at_ = 0;
  /// The garbled reply of this session was reported (to the oldest command in flight).
  bool garbled_reply_reported_ = false;
  CircuitBreaker* breaker_ = nullptr;  ///< the dispatcher's, for this server
  /// Why owned here: its WAITs go on this connection, and end with it.
  std::unique_ptr<ReplicaWaits> replica_waits_;
  PendingCount pending_;            ///< queued + in flight, not yet completed
  std::deque<CommandOp*> queue_;    ///< waiting for a connection, in send order
  std::coroutine_handle<> closer_;  ///< close() waiting for in-flight commands
  bool closer_scheduled_ = false;
  Completion closed_;  ///< a second close() waits for the first
};

}  // namespace redlimit::detail

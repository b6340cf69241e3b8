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

#include "redis/backoff.hpp"
#include "redis/command_op.hpp"
#include "redis/endpoint.hpp"
#include "redlimit/task.hpp"
#include "runtime/close_latch.hpp"
#include "runtime/completion.hpp"
#include "runtime/ready_queue.hpp"
#include "runtime/uv_handles.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

struct ConnectionSettings {
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};
  std::size_t max_pending = 65536;
};

/// One hiredis async context to one Redis server, on one loop, kept connected.
///
/// Every command completes exactly once, by its deadline: with the reply, or with
/// ConnectionError, TimeoutError, Overloaded or UsageError (after close). Replies resume their
/// coroutine inline from the read callback; every other completion is resumed from the loop
/// through the ready queue, never from inside hiredis or a timer sweep.
///
/// States: idle (never connected) -> connecting (TCP, then AUTH/SELECT/PING) -> ready; a failed
/// attempt -> backoff -> connecting; a lost connection -> connecting at once. Commands wait in
/// the queue while connecting and fail fast in backoff. At most one attempt is in flight.
class Connection {
 public:
  using Clock = std::chrono::steady_clock;

  Connection(uv_loop_t* loop, Endpoint endpoint, ConnectionSettings settings,
             std::shared_ptr<spdlog::logger> logger);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Sends `argv` (copied before this returns) and returns the awaiter of the outcome.
  CommandAwaiter send(std::span<const std::string_view> argv, Clock::time_point deadline) {
    return send(argv, deadline, Clock::now(), 1);
  }
  /// Sends ASKING and then `argv`, back to back: the awaiters of both outcomes. ASKING is only
  /// sent if `argv` will be too (ASKING alone would apply to another caller's command).
  std::pair<CommandAwaiter, CommandAwaiter> send_asking(std::span<const std::string_view> argv,
                                                        Clock::time_point deadline);

  /// Fails queued commands, waits for those in flight, disconnects, closes every handle. A call
  /// while another is under way waits for that one.
  Task<void> close();

  /// The sequence number the next command sent will get.
  std::uint64_t next_sequence() const noexcept { return sequence_ + 1; }
  /// Commands waiting for a connection or a reply.
  std::size_t pending() const noexcept { return pending_; }
  const Endpoint& endpoint() const noexcept { return endpoint_; }
  /// endpoint().display(), made once: the server's name for logs and per-server state.
  const std::string& name() const noexcept { return name_; }
  /// False once close() has begun: commands sent now fail with UsageError.
  bool accepting() const noexcept { return state_ != State::closing && state_ != State::closed; }
  /// True once close() has finished.
  bool closed() const noexcept { return state_ == State::closed; }
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return logger_; }

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

  /// Internal: the awaiter gives up on `op` (its frame was destroyed).
  void abandon(CommandOp* op) noexcept;

 private:
  enum class State { idle, connecting, ready, backoff, closing, closed };

  // hiredis callbacks (static: hiredis calls plain functions)
  static void on_connect(const redisAsyncContext* context, int status);
  static void on_disconnect(const redisAsyncContext* context, int status);
  static void on_handshake_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_reply(redisAsyncContext* context, void* reply, void* privdata);
  // timer and ready-queue callbacks
  static void on_deadline_timer(void* self);
  static void on_connect_timer(void* self);
  static void on_backoff_timer(void* self);
  static void resume_op(void* op);
  static void resume_closer(void* self);

  /// send() as of `now`, refused (Overloaded) unless `room` commands fit under max_pending.
  CommandAwaiter send(std::span<const std::string_view> argv, Clock::time_point deadline,
                      Clock::time_point now, std::size_t room);
  void start_connect();
  void send_handshake();
  void become_ready();
  void attempt_failed(std::exception_ptr error);
  void drop_context(const std::string& reason);
  void context_lost(const std::string& reason);
  bool dispatch(CommandOp* op, std::span<const std::string_view> argv);
  void complete(CommandOp* op, std::exception_ptr error);
  void complete_inline(CommandOp* op, Reply reply);
  void finish(CommandOp* op);
  void fail_queued(const std::exception_ptr& error);
  void link_deadline(CommandOp* op);
  void unlink_deadline(CommandOp* op) noexcept;
  void arm_deadline_timer();
  void expire_deadlines();
  void notify_if_drained();

  uv_loop_t* loop_;
  Endpoint endpoint_;
  std::string name_ = endpoint_.display();
  ConnectionSettings settings_;
  std::shared_ptr<spdlog::logger> logger_;
  // Why shared: hiredis's poll glue closes on its own schedule and may outlive this object.
  std::shared_ptr<CloseLatch> latch_ = std::make_shared<CloseLatch>();
  Timer deadline_timer_;
  Timer connect_timer_;
  Timer backoff_timer_;
  ReadyQueue ready_;
  Backoff backoff_;

  State state_ = State::idle;
  redisAsyncContext* context_ = nullptr;  ///< owned; freed with redisAsyncFree, or by hiredis
  int handshake_replies_ = 0;
  std::exception_ptr last_error_;  ///< why the last attempt failed (commands fail fast with it)
  std::string lost_reason_;        ///< why we dropped the context (for its NULL replies)
  std::string command_buffer_;     ///< RESP encoding of the command being sent, reused
  std::uint64_t sequence_ = 0;
  std::vector<std::uint64_t> script_loads_;  ///< per script: sequence of its last EVAL
  std::size_t pending_ = 0;                  ///< queued + in flight, not yet completed
  std::deque<CommandOp*> queue_;             ///< waiting for a connection, in send order
  CommandOp* earliest_ = nullptr;            ///< deadline list head
  CommandOp* latest_ = nullptr;              ///< deadline list tail
  Clock::time_point timer_due_{};
  std::coroutine_handle<> closer_;  ///< close() waiting for in-flight commands
  bool closer_scheduled_ = false;
  Completion closed_;  ///< a second close() waits for the first
};

}  // namespace redlimit::detail

#include "redis/connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "redis/circuit_breaker.hpp"
#include "redis/replica_waits.hpp"
#include "redis/reply_builder.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

CommandAwaiter::~CommandAwaiter() {
  if (op_ == nullptr) return;
  op_->waiter = {};
  if (op_->stage != CommandOp::Stage::done && op_->connection != nullptr) {
    op_->connection->abandon(op_);
  }
  CommandOp::release(op_);
}

CommandResult CommandAwaiter::await_resume() {
  CommandOp* op = std::exchange(op_, nullptr);
  struct Release {
    CommandOp* op;
    ~Release() { CommandOp::release(op); }
  } release{op};
  if (op->error) std::rethrow_exception(op->error);
  return CommandResult{std::move(*op->reply), op->sequence};
}

Connection::Connection(uv_loop_t* loop, Endpoint endpoint, ConnectionSettings settings,
                       std::shared_ptr<spdlog::logger> logger, std::string name)
    : max_pending_(settings.max_pending),
      metrics_(settings.metrics),
      session_(loop, {std::move(endpoint)}, settings, std::move(logger), "connection",
               Session::Replies::built, *this),
      name_(name.empty() ? session_.endpoint().display() : std::move(name)),
      deadlines_(loop, &on_deadline, this, session_.latch()),
      ready_(loop, session_.latch()),
      pending_(metrics_ != nullptr ? &metrics_->commands_in_flight : nullptr) {}

void Connection::attach_replica_waits(std::unique_ptr<ReplicaWaits> waits) {
  replica_waits_ = std::move(waits);
}

Connection::~Connection() {
  if (closed()) return;
  logger()->error("redis {}: client destroyed before close() finished; {} commands abandoned",
                  name_, pending_.value());
  // Why: nothing may call back into this object once it is gone (the session's destructor
  // frees the context, whose pending callbacks then find their op orphaned).
  deadlines_.orphan_all();
}

std::pair<CommandAwaiter, CommandAwaiter> Connection::send_asking(
    std::span<const std::string_view> argv, Clock::time_point deadline, bool follow_up) {
  static constexpr std::array<std::string_view, 1> asking = {"ASKING"};
  // Why one clock reading and room for two: if ASKING is accepted, so is the command.
  const auto now = Clock::now();
  CommandAwaiter ask = send(asking, deadline, now, 2, true, follow_up);
  CommandAwaiter command = send(argv, deadline, now, 1, false, follow_up);
  return {std::move(ask), std::move(command)};
}

CommandAwaiter Connection::send(std::span<const std::string_view> argv, Clock::time_point deadline,
                                Clock::time_point now, std::size_t room, bool asking,
                                bool follow_up) {
  auto* op = new CommandOp;
  op->connection = this;
  op->deadline = deadline;
  op->asking = asking;
  CommandAwaiter awaiter(op);
  auto fail_now = [op](std::exception_ptr error) {
    op->error = std::move(error);
    op->stage = CommandOp::Stage::done;
  };
  const bool draining = follow_up && session_.draining();
  if (!session_.accepting() && !draining) {
    fail_now(std::make_exception_ptr(UsageError("command on a closed Redis client")));
    return awaiter;
  }
  if (deadline <= now) {
    fail_now(std::make_exception_ptr(TimeoutError(
        "redis " + name_ + ": the deadline passed before sending (nothing was sent)")));
    return awaiter;
  }
  if (pending_.value() + room > max_pending_) {
    fail_now(std::make_exception_ptr(Overloaded("redis " + name_ + ": " +
                                                std::to_string(pending_.value()) +
                                                " commands outstanding (max_pending)")));
    return awaiter;
  }
  session_.open();
  switch (session_.state()) {
    case Session::State::ready:
    case Session::State::closing:  // draining (refused above otherwise)
      if (!dispatch(op, argv)) {
        fail_now(std::make_exception_ptr(
            ConnectionError("redis " + name_ + ": the connection is closing")));
        return awaiter;
      }
      break;
    case Session::State::connecting:
      op->queued_argv.assign(argv.begin(), argv.end());
      queue_.push_back(op);
      break;
    default: {
      std::exception_ptr error = session_.last_error();
      if (!error) error = std::make_exception_ptr(ConnectionError("not connected"));
      try {
        std::rethrow_exception(error);
      } catch (const ConfigError&) {
        fail_now(error);
      } catch (...) {
        fail_now(std::make_exception_ptr(
            ConnectionError("redis " + name_ + " unavailable (" + describe(error) +
                            "); the next connection attempt is pending")));
      }
      return awaiter;
    }
  }
  pending_.increment();
  deadlines_.insert(op);
  deadlines_.arm();
  return awaiter;
}

bool Connection::known_down() const noexcept {
  return session_.state() == Session::State::backoff || (breaker_ != nullptr && breaker_->open());
}

bool Connection::dispatch(CommandOp* op, std::span<const std::string_view> argv) {
  if (!session_.send(&on_reply, op, argv)) return false;
  ++op->references;  // hiredis holds the op until its callback
  op->stage = CommandOp::Stage::in_flight;
  op->sequence = ++sequence_;
  if (metrics_ != nullptr && !op->asking) metrics_->round_trips.add();
  return true;
}

void Connection::on_reply(redisAsyncContext* context, void* reply, void* privdata) {
  auto* op = static_cast<CommandOp*>(privdata);
  Connection* self = op->connection;
  if (self != nullptr && reply == nullptr) {
    // Why asked also for a command its caller abandoned: the garbled reply may have been its.
    std::exception_ptr error = self->lost_before_reply(context);
    if (op->stage == CommandOp::Stage::in_flight) self->complete(op, std::move(error));
  } else if (self != nullptr && op->stage == CommandOp::Stage::in_flight) {
    self->session_.backoff().reset();  // the server answers: failures no longer accumulate
    self->complete_inline(op, std::move(built_reply(reply)));
  }
  CommandOp::release(op);  // hiredis's reference
}

std::exception_ptr Connection::lost_before_reply(const redisAsyncContext* context) {
  // Why the first only: hiredis answers the commands in flight in the order sent, and replies
  // come in that order, so the reply it could not read was the oldest's.
  if (context->err == REDIS_ERR_PROTOCOL && !garbled_reply_reported_) {
    garbled_reply_reported_ = true;
    return std::make_exception_ptr(ProtocolError("redis " + name_ + ": the reply is not RESP (" +
                                                 context->errstr +
                                                 "); the connection is dropped and made again"));
  }
  const std::string reason = context->err != 0 ? context->errstr : session_.lost_reason();
  return std::make_exception_ptr(ConnectionError(
      "redis " + name_ + ": connection lost (" + reason + ") before the reply", true));
}

void Connection::finish(CommandOp* op) {
  if (op->stage == CommandOp::Stage::queued) {
    if (auto it = std::find(queue_.begin(), queue_.end(), op); it != queue_.end()) {
      queue_.erase(it);
    }
  }
  op->stage = CommandOp::Stage::done;
  deadlines_.erase(op);
  pending_.decrement();
}

void Connection::complete(CommandOp* op, std::exception_ptr error) {
  op->error = std::move(error);
  finish(op);
  if (op->waiter) {
    ++op->references;  // the ready queue's
    ready_.push(&resume_op, op);
  }
  notify_if_drained();
}

void Connection::complete_inline(CommandOp* op, Reply reply) {
  op->reply = std::move(reply);
  finish(op);
  notify_if_drained();
  if (auto waiter = std::exchange(op->waiter, {})) waiter.resume();
}

void Connection::resume_op(void* argument) {
  auto* op = static_cast<CommandOp*>(argument);
  auto waiter = std::exchange(op->waiter, {});
  CommandOp::release(op);  // the ready queue's; the awaiter still holds one if it waits
  if (waiter) waiter.resume();
}

void Connection::abandon(CommandOp* op) noexcept {
  // A command in flight stays with hiredis, which discards its late reply.
  finish(op);
  notify_if_drained();
}

void Connection::fail_queued(const std::exception_ptr& error) {
  std::deque<CommandOp*> queued;
  queued.swap(queue_);
  for (CommandOp* op : queued) {
    op->queued_argv.clear();
    complete(op, error);
  }
}

// ---- deadlines

void Connection::on_deadline(void* self) {
  static_cast<Connection*>(self)->expire_deadlines();
}

void Connection::expire_deadlines() {
  read_arrived_replies();
  const auto now = Clock::now();
  bool reply_lost = false;
  while (CommandOp* op = deadlines_.expired(now)) {
    if (op->stage == CommandOp::Stage::queued) {
      op->queued_argv.clear();
      complete(op, std::make_exception_ptr(TimeoutError(
                       "redis " + name_ +
                       ": no connection within the command's deadline (nothing was sent)")));
    } else {
      reply_lost = true;
      complete(op, std::make_exception_ptr(
                       TimeoutError("redis " + name_ + ": no reply within the deadline", true)));
    }
  }
  deadlines_.arm();
  // Why: replies come in order, so every later reply on this connection is stuck behind the
  // missing one; a fresh connection serves the next commands sooner. A server too slow to
  // answer in time counts as a failure, so reconnects back off.
  if (reply_lost) session_.reconnect_after_failure("a reply missed its deadline");
}

void Connection::read_arrived_replies() {
  // Why: libuv runs timers before it polls for I/O, so after a turn that kept the loop busy a
  // reply that arrived before its deadline may still wait in the socket; reading it first
  // completes its command rather than judging it late (and dropping the connection).
  // Only a ready or draining connection has commands in flight (while connecting, they wait
  // in queue_).
  const bool in_flight = session_.state() == Session::State::ready || session_.draining();
  if (!in_flight || !deadlines_.expired(Clock::now())) return;
  // hiredis reads what the socket holds without blocking (nothing: EAGAIN, no change).
  redisAsyncHandleRead(session_.context());
}

void Connection::notify_if_drained() {
  if (session_.state() == Session::State::closing && closer_ && !closer_scheduled_ &&
      pending_.value() == 0) {
    closer_scheduled_ = true;
    ready_.push(&resume_closer, this);
  }
}

// ---- connecting

void Connection::session_ready() {
  garbled_reply_reported_ = false;
  // Why: the server may be another one, or restarted; scripts are loaded again at first use.
  forget_scripts();
  // Why: the handshake was an answer from the server; calls need not wait out the breaker's
  // open period, nor a probe sent while the connection was down (it waited for the connection,
  // and may fail at its deadline).
  if (breaker_ != nullptr && breaker_->open()) {
    logger()->info("redis {}: connected again; circuit breaker closed", breaker_->server());
    breaker_->success();
  }
  std::deque<CommandOp*> queued;
  queued.swap(queue_);
  const auto now = Clock::now();
  for (CommandOp* op : queued) {
    if (op->deadline <= now) {  // the deadline timer has not swept it yet
      op->queued_argv.clear();
      complete(op, std::make_exception_ptr(TimeoutError(
                       "redis " + name_ +
                       ": no connection within the command's deadline (nothing was sent)")));
      continue;
    }
    const std::vector<std::string_view> argv(op->queued_argv.begin(), op->queued_argv.end());
    const bool sent = dispatch(op, argv);
    op->queued_argv.clear();
    if (!sent) {
      complete(op, std::make_exception_ptr(
                       ConnectionError("redis " + name_ + ": the connection closed at once")));
    }
  }
}

void Connection::session_failed(const std::exception_ptr& error) {
  fail_queued(error);
}

// ---- closing

void Connection::resume_closer(void* argument) {
  auto* self = static_cast<Connection*>(argument);
  self->closer_scheduled_ = false;
  if (auto closer = std::exchange(self->closer_, {})) closer.resume();
}

Task<void> Connection::close() {
  if (!session_.accepting()) {
    co_await closed_.wait();
    co_return;
  }
  session_.begin_close();
  fail_queued(std::make_exception_ptr(
      ConnectionError("redis " + name_ + ": client closed before sending")));
  struct Drained {
    explicit Drained(Connection& owner) : connection(owner) {}
    Connection& connection;
    bool await_ready() const noexcept {
      return connection.pending_.value() == 0 && connection.ready_.empty();
    }
    void await_suspend(std::coroutine_handle<> closer) {
      connection.closer_ = closer;
      if (connection.pending_.value() == 0) {  // only resumptions left: run them first
        connection.closer_scheduled_ = true;
        connection.ready_.push(&resume_closer, &connection);
      }
    }
    void await_resume() const noexcept {}
  };
  // Why a loop: commands completed while draining may be followed up (a reload after NOSCRIPT
  // is sent and waited for) or retried by their callers (they get UsageError, or wait in the
  // ready queue); close only once nothing is left.
  for (Drained drained(*this); !drained.await_ready();)
    co_await drained;
  // Why here: its WAITs were answered in the drain, and its timer must close with the loop's
  // other handles of the client.
  replica_waits_.reset();
  session_.release();
  deadlines_.close();
  ready_.close();
  co_await session_.closed();
  closed_.set();
}

}  // namespace redlimit::detail

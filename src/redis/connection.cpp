#include "redis/connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <random>

#include "redis/hiredis_context.hpp"
#include "redis/reply_builder.hpp"
#include "redis/reply_convert.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

using Clock = Connection::Clock;

std::uint64_t milliseconds_until(Clock::time_point due) {
  const auto left = due - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

std::string what(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

bool is_transient_handshake_error(std::string_view code) {
  return code == "LOADING" || code == "BUSY" || code == "MASTERDOWN" || code == "TRYAGAIN";
}

}  // namespace

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
                       std::shared_ptr<spdlog::logger> logger)
    : loop_(loop),
      endpoint_(std::move(endpoint)),
      settings_(settings),
      logger_(std::move(logger)),
      deadline_timer_(loop, &on_deadline_timer, this, latch_.get()),
      connect_timer_(loop, &on_connect_timer, this, latch_.get()),
      backoff_timer_(loop, &on_backoff_timer, this, latch_.get()),
      ready_(loop, latch_.get()),
      backoff_(settings.reconnect_min, settings.reconnect_max,
               std::random_device{}() ^ reinterpret_cast<std::uintptr_t>(this)) {
  // Why: nothing waits on the backoff timer (commands fail fast meanwhile), so it must not
  // keep an otherwise finished loop running.
  backoff_timer_.unref();
}

Connection::~Connection() {
  if (state_ == State::closed) return;
  logger_->error("redis {}: client destroyed before close() finished; {} commands abandoned",
                 endpoint_.display(), pending_);
  // Why: nothing may call back into this object once it is gone.
  for (CommandOp* op = earliest_; op != nullptr; op = op->later)
    op->connection = nullptr;
  if (redisAsyncContext* context = std::exchange(context_, nullptr)) {
    context->data = nullptr;
    redisAsyncFree(context);
  }
}

std::pair<CommandAwaiter, CommandAwaiter> Connection::send_asking(
    std::span<const std::string_view> argv, Clock::time_point deadline) {
  static constexpr std::array<std::string_view, 1> asking = {"ASKING"};
  // Why one clock reading and room for two: if ASKING is accepted, so is the command.
  const auto now = Clock::now();
  CommandAwaiter ask = send(asking, deadline, now, 2);
  CommandAwaiter command = send(argv, deadline, now, 1);
  return {std::move(ask), std::move(command)};
}

CommandAwaiter Connection::send(std::span<const std::string_view> argv, Clock::time_point deadline,
                                Clock::time_point now, std::size_t room) {
  auto* op = new CommandOp;
  op->connection = this;
  op->deadline = deadline;
  CommandAwaiter awaiter(op);
  auto fail_now = [op](std::exception_ptr error) {
    op->error = std::move(error);
    op->stage = CommandOp::Stage::done;
  };
  if (state_ == State::closing || state_ == State::closed) {
    fail_now(std::make_exception_ptr(UsageError("command on a closed Redis client")));
    return awaiter;
  }
  if (deadline <= now) {
    fail_now(std::make_exception_ptr(
        TimeoutError("redis " + endpoint_.display() +
                     ": the deadline passed before sending (nothing was sent)")));
    return awaiter;
  }
  if (pending_ + room > settings_.max_pending) {
    fail_now(std::make_exception_ptr(Overloaded("redis " + endpoint_.display() + ": " +
                                                std::to_string(pending_) +
                                                " commands outstanding (max_pending)")));
    return awaiter;
  }
  if (state_ == State::idle) start_connect();
  switch (state_) {
    case State::ready:
      if (!dispatch(op, argv)) {
        fail_now(std::make_exception_ptr(
            ConnectionError("redis " + endpoint_.display() + ": the connection is closing")));
        return awaiter;
      }
      break;
    case State::connecting:
      op->queued_argv.assign(argv.begin(), argv.end());
      queue_.push_back(op);
      break;
    default: {
      std::exception_ptr error = last_error_;
      if (!error) error = std::make_exception_ptr(ConnectionError("not connected"));
      try {
        std::rethrow_exception(error);
      } catch (const ConfigError&) {
        fail_now(error);
      } catch (...) {
        fail_now(std::make_exception_ptr(
            ConnectionError("redis " + endpoint_.display() + " unavailable (" + what(error) +
                            "); the next connection attempt is pending")));
      }
      return awaiter;
    }
  }
  ++pending_;
  link_deadline(op);
  arm_deadline_timer();
  return awaiter;
}

bool Connection::dispatch(CommandOp* op, std::span<const std::string_view> argv) {
  if (!send_argv(context_, &on_reply, op, argv, command_buffer_)) return false;
  ++op->references;  // hiredis holds the op until its callback
  op->stage = CommandOp::Stage::in_flight;
  op->sequence = ++sequence_;
  return true;
}

void Connection::on_reply(redisAsyncContext* context, void* reply, void* privdata) {
  auto* op = static_cast<CommandOp*>(privdata);
  Connection* self = op->connection;
  if (self != nullptr && op->stage == CommandOp::Stage::in_flight) {
    if (reply == nullptr) {
      const std::string reason = context->err != 0 ? context->errstr : self->lost_reason_;
      self->complete(op, std::make_exception_ptr(ConnectionError(
                             "redis " + self->endpoint_.display() + ": connection lost (" + reason +
                                 ") before the reply",
                             true)));
    } else {
      self->backoff_.reset();  // the server answers: failures no longer accumulate
      self->complete_inline(op, std::move(built_reply(reply)));
    }
  }
  CommandOp::release(op);  // hiredis's reference
}

void Connection::finish(CommandOp* op) {
  if (op->stage == CommandOp::Stage::queued) {
    if (auto it = std::find(queue_.begin(), queue_.end(), op); it != queue_.end()) {
      queue_.erase(it);
    }
  }
  op->stage = CommandOp::Stage::done;
  unlink_deadline(op);
  --pending_;
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

void Connection::link_deadline(CommandOp* op) {
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

void Connection::unlink_deadline(CommandOp* op) noexcept {
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

void Connection::arm_deadline_timer() {
  if (earliest_ == nullptr) return;
  const auto due = earliest_->deadline;
  if (deadline_timer_.active() && timer_due_ <= due) return;
  timer_due_ = due;
  deadline_timer_.start(milliseconds_until(due));
}

void Connection::on_deadline_timer(void* self) {
  static_cast<Connection*>(self)->expire_deadlines();
}

void Connection::expire_deadlines() {
  const auto now = Clock::now();
  bool reply_lost = false;
  while (earliest_ != nullptr && earliest_->deadline <= now) {
    CommandOp* op = earliest_;
    if (op->stage == CommandOp::Stage::queued) {
      op->queued_argv.clear();
      complete(op, std::make_exception_ptr(TimeoutError(
                       "redis " + endpoint_.display() +
                       ": no connection within the command's deadline (nothing was sent)")));
    } else {
      reply_lost = true;
      complete(op, std::make_exception_ptr(TimeoutError(
                       "redis " + endpoint_.display() + ": no reply within the deadline", true)));
    }
  }
  arm_deadline_timer();
  if (reply_lost && state_ == State::ready) {
    // Why: replies come in order, so every later reply on this connection is stuck behind the
    // missing one; a fresh connection serves the next commands sooner.
    // A server too slow to answer in time counts as a failure, so reconnects back off.
    const auto delay = backoff_.next();
    logger_->warn("redis {}: a reply missed its deadline; reconnecting in {} ms",
                  endpoint_.display(), delay.count());
    drop_context("a reply missed its deadline");
    state_ = State::connecting;
    backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
  }
}

void Connection::notify_if_drained() {
  if (state_ == State::closing && closer_ && !closer_scheduled_ && pending_ == 0) {
    closer_scheduled_ = true;
    ready_.push(&resume_closer, this);
  }
}

// ---- connecting

void Connection::start_connect() {
  state_ = State::connecting;
  OpenedContext opened = open_context(endpoint_, loop_, latch_, this, &on_connect, &on_disconnect);
  if (opened.context == nullptr) {
    attempt_failed(std::make_exception_ptr(ConnectionError(opened.error)));
    return;
  }
  context_ = opened.context;
  build_replies_as_reply(context_);
  connect_timer_.start(static_cast<std::uint64_t>(settings_.connect_timeout.count()));
  send_handshake();
}

void Connection::send_handshake() {
  handshake_replies_ = 0;
  auto send = [this](std::initializer_list<std::string_view> argv) {
    if (send_argv(context_, &on_handshake_reply, nullptr, argv, command_buffer_))
      ++handshake_replies_;
  };
  if (!endpoint_.password.empty()) {
    if (endpoint_.user.empty()) {
      send({"AUTH", endpoint_.password});
    } else {
      send({"AUTH", endpoint_.user, endpoint_.password});
    }
  }
  const std::string db = std::to_string(endpoint_.db);
  if (endpoint_.db != 0) send({"SELECT", db});
  // Why PING: a TCP connect succeeds even when the server is stopped (the kernel accepts);
  // only an answer shows the server is alive.
  send({"PING"});
}

void Connection::on_connect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<Connection*>(context->data);
  if (self == nullptr || status == REDIS_OK) return;  // on success, the handshake decides
  const std::string why = context->c.errstr;
  // hiredis frees the context when this returns; its pending handshake replies come as NULL.
  const_cast<redisAsyncContext*>(context)->data = nullptr;
  self->context_ = nullptr;
  self->attempt_failed(std::make_exception_ptr(
      ConnectionError("cannot connect to " + self->endpoint_.display() + ": " + why)));
}

void Connection::on_handshake_reply(redisAsyncContext* context, void* reply, void*) {
  auto* self = static_cast<Connection*>(context->data);
  // Dropped, or closing (close() drops the context); a disconnect reports itself.
  if (self == nullptr || reply == nullptr || self->state_ != State::connecting) return;
  const Reply& answer = built_reply(reply);
  if (answer.type == Reply::Type::error) {
    const std::string message = answer.str;
    const std::string who =
        self->endpoint_.user.empty() ? "the default user" : "user '" + self->endpoint_.user + "'";
    const std::string text = "redis " + self->endpoint_.display() +
                             " refused the connection setup for " + who + ": " + message;
    std::exception_ptr error = is_transient_handshake_error(error_code(message))
                                   ? std::make_exception_ptr(ConnectionError(text))
                                   : std::make_exception_ptr(ConfigError(text));
    self->drop_context("the connection setup failed");
    self->attempt_failed(std::move(error));
    return;
  }
  if (--self->handshake_replies_ == 0) self->become_ready();
}

void Connection::on_disconnect(const redisAsyncContext* context, int) {
  auto* self = static_cast<Connection*>(context->data);
  if (self == nullptr) return;
  const std::string why = context->err != 0 ? context->errstr : "disconnected";
  self->context_ = nullptr;  // hiredis frees it when this returns
  self->context_lost(why);
}

void Connection::on_connect_timer(void* argument) {
  auto* self = static_cast<Connection*>(argument);
  if (self->state_ != State::connecting || self->context_ == nullptr) return;
  self->drop_context("the connection attempt timed out");
  self->attempt_failed(std::make_exception_ptr(
      ConnectionError("connecting to " + self->endpoint_.display() + " timed out after " +
                      std::to_string(self->settings_.connect_timeout.count()) + " ms")));
}

void Connection::on_backoff_timer(void* argument) {
  auto* self = static_cast<Connection*>(argument);
  if (self->state_ == State::backoff || self->state_ == State::connecting) self->start_connect();
}

void Connection::become_ready() {
  connect_timer_.stop();
  if (backoff_.failures() > 0) logger_->info("redis {}: connected", endpoint_.display());
  last_error_ = nullptr;
  state_ = State::ready;
  std::deque<CommandOp*> queued;
  queued.swap(queue_);
  const auto now = Clock::now();
  for (CommandOp* op : queued) {
    if (op->deadline <= now) {  // the deadline timer has not swept it yet
      op->queued_argv.clear();
      complete(op, std::make_exception_ptr(TimeoutError(
                       "redis " + endpoint_.display() +
                       ": no connection within the command's deadline (nothing was sent)")));
      continue;
    }
    const std::vector<std::string_view> argv(op->queued_argv.begin(), op->queued_argv.end());
    const bool sent = dispatch(op, argv);
    op->queued_argv.clear();
    if (!sent) {
      complete(op, std::make_exception_ptr(ConnectionError("redis " + endpoint_.display() +
                                                           ": the connection closed at once")));
    }
  }
}

void Connection::attempt_failed(std::exception_ptr error) {
  connect_timer_.stop();
  if (state_ == State::closing || state_ == State::closed) return;
  last_error_ = error;
  const auto delay = backoff_.next();
  logger_->warn("redis {}: connection attempt failed: {}; next attempt in {} ms",
                endpoint_.display(), what(error), delay.count());
  state_ = State::backoff;
  fail_queued(error);
  backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
}

void Connection::drop_context(const std::string& reason) {
  redisAsyncContext* context = std::exchange(context_, nullptr);
  if (context == nullptr) return;
  context->data = nullptr;  // its connect and disconnect callbacks are ours to ignore now
  lost_reason_ = reason;
  // Outside hiredis this runs every pending callback with NULL now; inside a hiredis callback,
  // hiredis does it when the callback returns.
  redisAsyncFree(context);
}

void Connection::context_lost(const std::string& reason) {
  connect_timer_.stop();
  switch (state_) {
    case State::ready:
      logger_->warn("redis {}: connection lost ({}); reconnecting", endpoint_.display(), reason);
      // Why a timer: a new context is not created inside the old one's callbacks.
      state_ = State::connecting;
      backoff_timer_.start(0);
      break;
    case State::connecting:
      attempt_failed(std::make_exception_ptr(
          ConnectionError("redis " + endpoint_.display() + " closed the connection during setup (" +
                          reason + ")")));
      break;
    default:
      break;
  }
}

// ---- closing

void Connection::resume_closer(void* argument) {
  auto* self = static_cast<Connection*>(argument);
  self->closer_scheduled_ = false;
  if (auto closer = std::exchange(self->closer_, {})) closer.resume();
}

Task<void> Connection::close() {
  if (state_ == State::closing || state_ == State::closed) {
    co_await closed_.wait();
    co_return;
  }
  state_ = State::closing;
  backoff_timer_.stop();
  connect_timer_.stop();
  fail_queued(std::make_exception_ptr(
      ConnectionError("redis " + endpoint_.display() + ": client closed before sending")));
  struct Drained {
    explicit Drained(Connection& owner) : connection(owner) {}
    Connection& connection;
    bool await_ready() const noexcept {
      return connection.pending_ == 0 && connection.ready_.empty();
    }
    void await_suspend(std::coroutine_handle<> closer) {
      connection.closer_ = closer;
      if (connection.pending_ == 0) {  // only resumptions left: run them first
        connection.closer_scheduled_ = true;
        connection.ready_.push(&resume_closer, &connection);
      }
    }
    void await_resume() const noexcept {}
  };
  // Why a loop: commands completed while draining may be retried by their callers (they get
  // UsageError, or wait in the ready queue); close only once nothing is left.
  for (Drained drained(*this); !drained.await_ready();)
    co_await drained;
  drop_context("client closed");
  deadline_timer_.close();
  connect_timer_.close();
  backoff_timer_.close();
  ready_.close();
  co_await latch_->all_closed();
  state_ = State::closed;
  closed_.set();
}

}  // namespace redlimit::detail

#include "redis/session.hpp"

#include <spdlog/spdlog.h>

#include <optional>
#include <random>
#include <utility>

#include "metrics/instruments.hpp"
#include "redis/endpoint_source.hpp"
#include "redis/reply_builder.hpp"
#include "redis/reply_convert.hpp"
#include "redis/tls_tunnel.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// The error message of a handshake reply, or nullopt when it is not an error.
std::optional<std::string> error_of(void* reply, Session::Replies replies) {
  if (replies == Session::Replies::built) {
    const Reply& answer = built_reply(reply);
    if (answer.type != Reply::Type::error) return std::nullopt;
    return answer.str;
  }
  const auto* answer = static_cast<const redisReply*>(reply);
  if (answer->type != REDIS_REPLY_ERROR) return std::nullopt;
  return std::string(answer->str, answer->len);
}

/// The level of a failure's log line: warn, or debug when the owner logs failures itself.
spdlog::level::level_enum failure_level(bool owner_logs_failures) {
  return owner_logs_failures ? spdlog::level::debug : spdlog::level::warn;
}

}  // namespace

Session::Session(uv_loop_t* loop, std::vector<Endpoint> endpoints, ConnectionSettings settings,
                 std::shared_ptr<spdlog::logger> logger, std::string role, Replies replies,
                 SessionEvents& events)
    : loop_(loop),
      endpoints_(std::move(endpoints)),
      settings_(settings),
      logger_(std::move(logger)),
      role_(std::move(role)),
      replies_(replies),
      events_(events),
      connect_timer_(loop, &on_connect_timer, this, latch_.get()),
      backoff_timer_(loop, &on_backoff_timer, this, latch_.get()),
      backoff_(settings.reconnect_min, settings.reconnect_max,
               std::random_device{}() ^ reinterpret_cast<std::uintptr_t>(this)) {
  // Why: nothing waits on the backoff timer (commands fail fast meanwhile), so it must not
  // keep an otherwise finished loop running.
  backoff_timer_.unref();
  if (settings_.endpoint_source != nullptr) settings_.endpoint_source->watch(*this);
}

Session::~Session() {
  if (settings_.endpoint_source != nullptr) settings_.endpoint_source->forget(*this);
  if (redisAsyncContext* context = std::exchange(context_, nullptr)) {
    context->data = nullptr;
    redisAsyncFree(context);
  }
  close_tunnel();
}

void Session::start_connect() {
  state_ = State::connecting;
  if (settings_.endpoint_source != nullptr) {
    std::optional<Endpoint> found = settings_.endpoint_source->current();
    if (!found) {
      // Queued commands wait (by their deadlines) for endpoint_changed() or endpoint_unknown().
      awaiting_endpoint_ = true;
      return;
    }
    endpoints_.assign(1, std::move(*found));
    current_ = 0;
  }
  Endpoint target = endpoint();
  if (target.tls) {
    // hiredis connects to the tunnel's unix socket; the tunnel connects to the server.
    try {
      if (!settings_.tls) throw ConfigError("TLS: no TLS settings for " + target.display());
      tunnel_ = TlsTunnel::open(loop_, settings_.tls, target, latch_, &on_tunnel_failed, this);
    } catch (...) {
      attempt_failed(std::current_exception());
      return;
    }
    target.transport = Endpoint::Transport::unix_socket;
    target.path = tunnel_->path();
  }
  OpenedContext opened = open_context(target, loop_, latch_, this, &on_connect, &on_disconnect);
  if (opened.context == nullptr) {
    close_tunnel();
    attempt_failed(std::make_exception_ptr(ConnectionError(opened.error)));
    return;
  }
  context_ = opened.context;
  if (replies_ == Replies::built) build_replies_as_reply(context_);
  connect_timer_.start(static_cast<std::uint64_t>(settings_.connect_timeout.count()));
  send_handshake();
}

void Session::send_handshake() {
  handshake_replies_ = 0;
  auto send = [this](std::initializer_list<std::string_view> argv) {
    if (send_argv(context_, &on_handshake_reply, nullptr, argv, command_buffer_))
      ++handshake_replies_;
  };
  const Endpoint& server = endpoint();
  if (!server.password.empty()) {
    if (server.user.empty()) {
      send({"AUTH", server.password});
    } else {
      send({"AUTH", server.user, server.password});
    }
  }
  const std::string db = std::to_string(server.db);
  if (server.db != 0) send({"SELECT", db});
  // Why PING: a TCP connect succeeds even when the server is stopped (the kernel accepts);
  // only an answer shows the server is alive.
  send({"PING"});
  // Why ROLE for a server found by a source: a sentinel's answer may be stale, and writes to
  // a replica would be refused (or, with replica-read-only off, lost).
  if (settings_.endpoint_source != nullptr) {
    if (send_argv(context_, &on_handshake_reply, this,
                  std::initializer_list<std::string_view>{"ROLE"}, command_buffer_)) {
      ++handshake_replies_;
    }
  }
}

void Session::on_connect(const redisAsyncContext* context, int status) {
  auto* self = static_cast<Session*>(context->data);
  if (self == nullptr || status == REDIS_OK) return;  // on success, the handshake decides
  const std::string why = context->c.errstr;
  // hiredis frees the context when this returns; its pending handshake replies come as NULL.
  const_cast<redisAsyncContext*>(context)->data = nullptr;
  self->context_ = nullptr;
  self->close_tunnel();
  self->attempt_failed(std::make_exception_ptr(
      ConnectionError("cannot connect to " + self->endpoint().display() + ": " + why)));
}

void Session::on_handshake_reply(redisAsyncContext* context, void* reply, void* role) {
  auto* self = static_cast<Session*>(context->data);
  // Dropped, or closing (close() drops the context); a disconnect reports itself.
  if (self == nullptr || reply == nullptr || self->state_ != State::connecting) return;
  if (role != nullptr) {
    if (const std::optional<std::string> why = self->not_a_primary(reply)) {
      self->drop_context("not the primary");
      self->attempt_failed(std::make_exception_ptr(
          ConnectionError("redis " + self->endpoint().display() + " " + *why)));
      return;
    }
  }
  if (const std::optional<std::string> message = error_of(reply, self->replies_)) {
    const Endpoint& server = self->endpoint();
    const std::string who = server.user.empty() ? "the default user" : "user '" + server.user + "'";
    const std::string text =
        "redis " + server.display() + " refused the connection setup for " + who + ": " + *message;
    // Why transient ones only: a server that cannot serve now (loading, busy, without its
    // cluster) is retried with backoff; a refusal (wrong password, no such db) is for a human.
    std::exception_ptr error = is_transient(classify_error_reply(*message))
                                   ? std::make_exception_ptr(ConnectionError(text))
                                   : std::make_exception_ptr(ConfigError(text));
    self->drop_context("the connection setup failed");
    self->attempt_failed(std::move(error));
    return;
  }
  if (--self->handshake_replies_ == 0) self->become_ready();
}

void Session::on_disconnect(const redisAsyncContext* context, int) {
  auto* self = static_cast<Session*>(context->data);
  if (self == nullptr) return;
  const std::string why = context->err != 0 ? context->errstr : "disconnected";
  self->context_ = nullptr;  // hiredis frees it when this returns
  self->close_tunnel();
  self->lost(why);
}

void Session::on_connect_timer(void* argument) {
  auto* self = static_cast<Session*>(argument);
  if (self->state_ != State::connecting || self->context_ == nullptr) return;
  // Why said: a server that is not TLS on that port may wait silently for more of the hello.
  const std::string unfinished =
      self->tunnel_ != nullptr && !self->tunnel_->handshake_done()
          ? " (the TLS handshake had not finished: is the port a TLS port?)"
          : "";
  self->drop_context("the connection attempt timed out");
  self->attempt_failed(std::make_exception_ptr(ConnectionError(
      "connecting to " + self->endpoint().display() + " timed out after " +
      std::to_string(self->settings_.connect_timeout.count()) + " ms" + unfinished)));
}

void Session::on_tunnel_failed(void* argument, std::exception_ptr error) {
  auto* self = static_cast<Session*>(argument);
  self->tunnel_ = nullptr;  // it closed itself before telling
  const std::string why = describe(error);
  if (self->state_ == State::connecting) {
    // Why its own error, not the context's: hiredis would only see its socket closed.
    self->drop_context(why);
    self->attempt_failed(std::move(error));
  } else if (self->state_ == State::ready) {
    self->drop_context(why);
    self->lost(why);
  }
}

void Session::close_tunnel() noexcept {
  if (TlsTunnel* tunnel = std::exchange(tunnel_, nullptr)) tunnel->close();
}

void Session::on_backoff_timer(void* argument) {
  auto* self = static_cast<Session*>(argument);
  if (self->state_ == State::backoff || self->state_ == State::connecting) self->start_connect();
}

void Session::become_ready() {
  connect_timer_.stop();
  if (backoff_.failures() > 0 && !owner_logs_failures_)
    logger_->info("redis {}: {} established", endpoint().display(), role_);
  last_error_ = nullptr;
  state_ = State::ready;
  if (was_ready_ && settings_.metrics != nullptr) settings_.metrics->reconnects.add();
  was_ready_ = true;
  events_.session_ready();
}

std::optional<std::string> Session::not_a_primary(void* reply) const {
  if (error_of(reply, replies_)) return std::nullopt;  // an error reply is judged as the others
  std::string role;
  if (replies_ == Replies::built) {
    const Reply& answer = built_reply(reply);
    if (answer.type == Reply::Type::array && !answer.elements.empty()) {
      role = answer.elements.front().str;
    }
  } else {
    const auto* answer = static_cast<const redisReply*>(reply);
    if (answer->type == REDIS_REPLY_ARRAY && answer->elements > 0) {
      role = std::string(answer->element[0]->str, answer->element[0]->len);
    }
  }
  if (role == "master") return std::nullopt;
  return "is not the primary (ROLE: " + (role.empty() ? "unreadable" : role) + ")";
}

void Session::endpoint_changed() {
  switch (state_) {
    case State::connecting:
      if (awaiting_endpoint_) {
        awaiting_endpoint_ = false;
        start_connect();
        return;
      }
      // An attempt to the old server: dropped, and the next one starts from the loop.
      drop_context("the server moved");
      backoff_timer_.start(0);
      return;
    case State::ready:
      logger_->info("redis {}: the {} moves to the new primary", endpoint().display(), role_);
      break_contact();
      drop_context("the server moved");
      state_ = State::connecting;
      backoff_timer_.start(0);
      events_.session_lost("the server moved");
      return;
    case State::backoff:
      backoff_timer_.start(0);
      return;
    default:
      return;
  }
}

void Session::endpoint_unknown(const std::exception_ptr& error) {
  if (state_ != State::connecting || !awaiting_endpoint_) return;
  awaiting_endpoint_ = false;
  // Why not attempt_failed(): the source looks again by itself; this only fails the waiting.
  const auto delay = backoff_.next();
  last_error_ = error;
  state_ = State::backoff;
  events_.session_failed(error);
  backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
}

void Session::attempt_failed(std::exception_ptr error) {
  connect_timer_.stop();
  if (!accepting()) return;
  if (settings_.endpoint_source != nullptr) settings_.endpoint_source->trouble_with(endpoint());
  last_error_ = error;
  const auto delay = backoff_.next();
  logger_->log(failure_level(owner_logs_failures_),
               "redis {}: {} attempt failed: {}; next attempt in {} ms", endpoint().display(),
               role_, describe(error), delay.count());
  next_endpoint();
  state_ = State::backoff;
  events_.session_failed(error);
  backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
}

void Session::lost(const std::string& reason) {
  connect_timer_.stop();
  switch (state_) {
    case State::ready:
      logger_->log(failure_level(owner_logs_failures_), "redis {}: {} lost ({}); reconnecting",
                   endpoint().display(), role_, reason);
      if (settings_.endpoint_source != nullptr) {
        settings_.endpoint_source->trouble_with(endpoint());
      }
      break_contact();
      next_endpoint();
      // Why a timer: a new context is not created inside the old one's callbacks. Why before
      // the event: the owner may delay it (back_off_after_loss).
      state_ = State::connecting;
      backoff_timer_.start(0);
      events_.session_lost(reason);
      break;
    case State::connecting:
      attempt_failed(std::make_exception_ptr(
          ConnectionError("redis " + endpoint().display() +
                          " closed the connection during setup (" + reason + ")")));
      break;
    default:
      break;
  }
}

void Session::back_off_after_loss() {
  if (state_ != State::connecting || context_ != nullptr) return;
  backoff_timer_.start(static_cast<std::uint64_t>(backoff_.next().count()));
}

void Session::reconnect_after_failure(const std::string& reason) {
  if (state_ != State::ready) return;
  const auto delay = backoff_.next();
  logger_->warn("redis {}: {}; reconnecting in {} ms", endpoint().display(), reason, delay.count());
  break_contact();
  drop_context(reason);
  state_ = State::connecting;
  backoff_timer_.start(static_cast<std::uint64_t>(delay.count()));
}

void Session::drop_context(const std::string& reason) {
  close_tunnel();
  redisAsyncContext* context = std::exchange(context_, nullptr);
  if (context == nullptr) return;
  context->data = nullptr;  // its connect and disconnect callbacks are ours to ignore now
  lost_reason_ = reason;
  // Outside hiredis this runs every pending callback with NULL now; inside a hiredis callback,
  // hiredis does it when the callback returns.
  redisAsyncFree(context);
}

void Session::begin_close() {
  closed_while_ready_ = state_ == State::ready;
  state_ = State::closing;
  backoff_timer_.stop();
  connect_timer_.stop();
}

void Session::release() {
  drop_context("client closed");
  connect_timer_.close();
  backoff_timer_.close();
}

Task<void> Session::closed() {
  co_await latch_->all_closed();
  state_ = State::closed;
}

}  // namespace redlimit::detail

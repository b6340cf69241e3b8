#pragma once

#include <hiredis/async.h>
#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redis/backoff.hpp"
#include "redis/endpoint.hpp"
#include "redis/hiredis_context.hpp"
#include "redlimit/task.hpp"
#include "runtime/close_latch.hpp"
#include "runtime/uv_handles.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

struct RedisMetrics;
class EndpointSource;
class TlsContext;
class TlsTunnel;

struct ConnectionSettings {
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};
  std::size_t max_pending = 65536;
  /// Where the connection counts what it does (round trips, reconnects, commands in flight);
  /// null: nowhere. Must outlive the connection.
  RedisMetrics* metrics = nullptr;
  /// The client's TLS configuration, for endpoints with `tls` (rediss://); null without one.
  std::shared_ptr<TlsContext> tls{};
  /// Where the server is found before each attempt (a Sentinel's primary; see EndpointSource),
  /// instead of the session's endpoints; null: they are given. Must outlive the session.
  EndpointSource* endpoint_source = nullptr;
  /// Counts the ends of ready connections (lost, moved to a new primary, dropped after a
  /// missed deadline): after one, the server on the other side may be another one, or the same
  /// one restarted without its data. Null: not counted. Must outlive the session.
  std::uint64_t* contact_breaks = nullptr;
};

/// What a Session tells its owner. Called from the loop (inside hiredis or a timer callback):
/// the owner must not destroy the session from them.
class SessionEvents {
 public:
  /// The handshake succeeded: the context takes commands.
  virtual void session_ready() = 0;
  /// A connection attempt failed with `error`; the next one starts after a backoff.
  virtual void session_failed(const std::exception_ptr& error) = 0;
  /// The established connection was lost (`reason`); a new attempt starts at once, unless the
  /// owner calls Session::back_off_after_loss() from here.
  virtual void session_lost(const std::string& reason) = 0;

 protected:
  ~SessionEvents() = default;
};

/// The lifecycle of one hiredis async context on one loop, kept connected: the one place that
/// opens a context, runs the handshake (AUTH, SELECT, PING), times the attempt out, backs off,
/// reconnects, drops the context and closes its handles. Connection and Subscriber each own one.
///
/// States: idle (never connected) -> connecting (TCP, then the handshake) -> ready; a failed
/// attempt -> backoff -> connecting; a lost connection -> connecting at once (after a backoff
/// step if the owner says it never proved useful: back_off_after_loss). At most one
/// attempt is in flight. Given several servers (the nodes of a cluster, for the subscriber), it
/// moves to the next one after a failed attempt or a lost connection.
class Session {
 public:
  enum class State { idle, connecting, ready, backoff, closing, closed };
  /// How the context's reader makes replies: as Reply (reply_builder.hpp), or as hiredis's own
  /// redisReply (which a subscribed context needs).
  enum class Replies { built, raw };

  /// `role` names the connection in logs ("connection", "subscriber connection").
  Session(uv_loop_t* loop, std::vector<Endpoint> endpoints, ConnectionSettings settings,
          std::shared_ptr<spdlog::logger> logger, std::string role, Replies replies,
          SessionEvents& events);
  /// Frees the context if close() did not (its pending callbacks run with NULL replies).
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Starts the first connection attempt, when idle.
  void open() {
    if (state_ == State::idle) start_connect();
  }
  State state() const noexcept { return state_; }
  /// False once close has begun.
  bool accepting() const noexcept { return state_ != State::closing && state_ != State::closed; }
  /// Closing, and the connection that was ready when close began is still up: what completes
  /// a command it ran may still go out on it.
  bool draining() const noexcept {
    return state_ == State::closing && closed_while_ready_ && context_ != nullptr;
  }
  /// The context: set while connecting (once the attempt has one) and ready, and after close
  /// began until it is freed; null otherwise.
  redisAsyncContext* context() const noexcept { return context_; }
  /// The server in use, or the one to try next.
  const Endpoint& endpoint() const noexcept { return endpoints_[current_]; }
  /// Why the last attempt failed; null once one succeeded.
  const std::exception_ptr& last_error() const noexcept { return last_error_; }
  /// The reconnect backoff; the owner resets it when the server proves it serves.
  Backoff& backoff() noexcept { return backoff_; }
  /// The latch the owner's own handles report to, so that close() waits for them too.
  CloseLatch* latch() const noexcept { return latch_.get(); }
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return logger_; }

  /// Queues `argv` on the context (see send_argv). False when hiredis refuses (the context is
  /// closing): the callback will never run.
  bool send(redisCallbackFn* callback, void* privdata, std::span<const std::string_view> argv) {
    return send_argv(context_, callback, privdata, argv, command_buffer_);
  }
  /// Why the session last dropped its context, for the NULL replies that follow.
  const std::string& lost_reason() const noexcept { return lost_reason_; }

  /// From SessionEvents::session_lost: the connection was lost before it proved useful (the
  /// server refused what the owner asked, and dropped it), so the next attempt waits a backoff
  /// step instead of starting at once.
  void back_off_after_loss();
  /// The owner logs failed attempts and lost connections itself (once per change of state);
  /// the session then logs them only at debug level.
  void leave_failure_logs_to_owner() noexcept { owner_logs_failures_ = true; }

  /// Drops a ready connection whose replies can no longer be trusted (one missed its
  /// deadline) and connects again after a backoff: the server counts as failing.
  void reconnect_after_failure(const std::string& reason);
  /// From the EndpointSource: the server moved (a failover). A connection to the old one is
  /// dropped, and the next attempt starts at once.
  void endpoint_changed();
  /// From the EndpointSource: no server could be found (`error`); an attempt waiting for one
  /// fails with it, and the next one asks again after a backoff step.
  void endpoint_unknown(const std::exception_ptr& error);
  /// Stops connecting: no attempt starts from now on. The context stays until release().
  void begin_close();
  /// Drops the context (its pending callbacks run with NULL replies before this returns) and
  /// closes the session's timers.
  void release();
  /// Completes once every handle reporting to latch() has closed: call release() and close
  /// the owner's own handles first.
  Task<void> closed();

 private:
  static void on_connect(const redisAsyncContext* context, int status);
  static void on_disconnect(const redisAsyncContext* context, int status);
  static void on_handshake_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_connect_timer(void* self);
  static void on_tunnel_failed(void* self, std::exception_ptr error);
  /// The reply to the handshake's ROLE, for a server found by an EndpointSource: nullopt when
  /// it is a primary, else why it will not do.
  std::optional<std::string> not_a_primary(void* reply) const;
  static void on_backoff_timer(void* self);

  void start_connect();
  void send_handshake();
  void become_ready();
  void attempt_failed(std::exception_ptr error);
  void lost(const std::string& reason);
  /// A ready connection ends: counted in ConnectionSettings::contact_breaks.
  void break_contact() noexcept {
    if (settings_.contact_breaks != nullptr) ++*settings_.contact_breaks;
  }
  void drop_context(const std::string& reason);
  /// Closes the TLS tunnel of the context, if any: it goes with the context.
  void close_tunnel() noexcept;
  void next_endpoint() noexcept { current_ = (current_ + 1) % endpoints_.size(); }

  uv_loop_t* loop_;
  std::vector<Endpoint> endpoints_;
  std::size_t current_ = 0;
  ConnectionSettings settings_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string role_;
  Replies replies_;
  SessionEvents& events_;
  // Why shared: hiredis's poll glue closes on its own schedule and may outlive this object.
  std::shared_ptr<CloseLatch> latch_ = std::make_shared<CloseLatch>();
  Timer connect_timer_;
  Timer backoff_timer_;
  Backoff backoff_;
  State state_ = State::idle;
  redisAsyncContext* context_ = nullptr;  ///< owned; freed with redisAsyncFree, or by hiredis
  /// The context's TLS tunnel (rediss://): it frees itself once closed (close_tunnel()).
  TlsTunnel* tunnel_ = nullptr;
  int handshake_replies_ = 0;
  /// Waiting for the EndpointSource to find the server (connecting, without a context).
  bool awaiting_endpoint_ = false;
  bool was_ready_ = false;  ///< a connection was established before (the next is a reconnect)
  bool closed_while_ready_ = false;  ///< begin_close() found the connection ready
  bool owner_logs_failures_ = false;
  std::exception_ptr last_error_;
  std::string lost_reason_;
  std::string command_buffer_;  ///< RESP encoding of the command being sent, reused
};

}  // namespace redlimit::detail

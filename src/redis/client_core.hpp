#pragma once

#include <uv.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "limiter/circuit_breaker.hpp"
#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "redis/slot_router.hpp"
#include "redis/subscriber.hpp"
#include "redlimit/client.hpp"

namespace redlimit::detail {

/// The implementation behind Client: options, routing, script calls.
class ClientCore {
 public:
  using Clock = Connection::Clock;

  ClientCore(uv_loop_t* loop, ClientOptions options);

  Task<void> connect();
  Task<void> close();
  Task<Reply> command(std::vector<std::string> argv);

  /// Runs an embedded script with EVALSHA; on NOSCRIPT, sends EVAL (which also loads it) or,
  /// when another call already reloaded it on this connection, EVALSHA once more. An error
  /// reply is raised (ReplyError; ConfigError for permissions, naming the script's commands).
  /// `keys` and `args` must stay valid until the task ends (co_await it at once).
  Task<Reply> eval(const scripts::ScriptSource& script, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args, Clock::time_point deadline);

  /// The deadline of a command issued now.
  Clock::time_point command_deadline() const noexcept {
    return Clock::now() + options_.command_timeout;
  }
  uv_loop_t* loop() const noexcept { return loop_; }
  const ClientOptions& options() const noexcept { return options_; }
  const std::shared_ptr<spdlog::logger>& logger() const noexcept { return options_.logger; }
  SlotRouter& router() noexcept { return *router_; }
  /// The pub/sub connection, created on first use.
  Subscriber& subscriber();
  /// Shared by the limiters of this client: whether calls should go to Redis now.
  CircuitBreaker& breaker() noexcept { return breaker_; }
  /// Throws UsageError when called from a thread other than the one that made the client.
  void check_thread() const;

 private:
  uv_loop_t* loop_;
  ClientOptions options_;
  std::thread::id owner_thread_ = std::this_thread::get_id();
  Endpoint endpoint_;
  CircuitBreaker breaker_;
  std::unique_ptr<SlotRouter> router_;
  std::unique_ptr<Subscriber> subscriber_;
  bool closing_ = false;
  Completion closed_;  ///< a second close() waits for the first
};

}  // namespace redlimit::detail

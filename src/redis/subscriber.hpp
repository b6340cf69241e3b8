#pragma once

#include <hiredis/async.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "redis/endpoint.hpp"
#include "redis/session.hpp"
#include "redlimit/task.hpp"
#include "runtime/completion.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

/// One pub/sub connection: handlers per channel, subscribed while they exist, subscribed again
/// after every reconnect. Given several servers (the nodes of a cluster, where messages reach
/// every node), it moves to the next one after a failed attempt or a lost connection. Messages
/// published while the connection is down are lost (pub/sub is fire-and-forget): a user must
/// either do without them or know when some may have been lost (listening()).
///
/// A refused SUBSCRIBE (an ACL user without +subscribe or the channel's pattern, a missing
/// password, a server at maxclients) is a failed attempt: the next one waits a backoff step
/// (ConnectionSettings::reconnect_min doubling to reconnect_max), reset once a subscription is
/// confirmed. It logs at warn once when refusals start or the connection is lost, and at info once
/// when it subscribes again, not once per attempt.
class Subscriber final : private SessionEvents {
 public:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(std::string_view message)>;

  Subscriber(uv_loop_t* loop, std::vector<Endpoint> endpoints, ConnectionSettings settings,
             std::shared_ptr<spdlog::logger> logger);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  /// Calls `handler` with each message on `channel` (from the loop, inside hiredis: it must not
  /// destroy the subscriber) until unsubscribe(id). Connects and subscribes as needed. Calls
  /// `on_confirmed`, if given, the same way each time the server confirms the subscription: the
  /// first time and after every reconnect (messages published meanwhile were lost).
  std::uint64_t subscribe(const std::string& channel, Handler handler,
                          std::function<void()> on_confirmed = {});
  void unsubscribe(std::uint64_t id);
  /// While the server confirms the channel of subscription `id`: a number that is new after
  /// every reconnect (messages published meanwhile were lost); 0 while it is not confirmed.
  /// The same number at two moments means no message on the channel between them was lost.
  std::uint64_t listening(std::uint64_t id) const;
  /// Completes once the server has confirmed the subscription to `channel`; TimeoutError at
  /// `deadline`.
  Task<void> confirmed(std::string channel, Clock::time_point deadline);
  /// Unsubscribes everything, disconnects, closes every handle.
  Task<void> close();

 private:
  /// Where the subscriber stands, for logging once per change.
  enum class Health {
    starting,      ///< no subscription confirmed yet, nothing failed
    subscribed,    ///< the server confirmed the last SUBSCRIBE sent
    reconnecting,  ///< a working connection was lost
    refused,       ///< attempts fail or SUBSCRIBE is refused: backing off
  };

  struct Channel {
    std::map<std::uint64_t, Handler> handlers;
    std::map<std::uint64_t, std::function<void()>> on_confirmed;  ///< per subscription id
    /// Nonzero while the server confirms the subscription: new at every confirmation
    /// (listening()).
    std::uint64_t generation = 0;
    std::vector<std::stop_source*> waiters;  ///< confirmed() calls to wake on confirmation
  };

  // Session events
  void session_ready() override;
  void session_failed(const std::exception_ptr& error) override;
  void session_lost(const std::string& reason) override;

  static void on_pubsub_reply(redisAsyncContext* context, void* reply, void* privdata);

  void send_subscribe(const std::string& channel);
  void unconfirm_all();
  bool any_unconfirmed() const;
  void enter_refused(const std::string& reason);
  void note_confirmed();
  void wake_waiters(Channel& channel);
  bool closing() const noexcept { return !session_.accepting(); }
  std::string display() const { return session_.endpoint().display(); }

  uv_loop_t* loop_;
  Session session_;
  Health health_ = Health::starting;
  std::map<std::string, Channel> channels_;
  std::map<std::uint64_t, std::string> channel_of_;  ///< subscription id -> channel
  std::uint64_t next_id_ = 1;
  std::uint64_t generations_ = 0;  ///< confirmations so far, for Channel::generation
  Completion closed_;              ///< a second close() waits for the first
};

}  // namespace redlimit::detail

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

#include "redis/backoff.hpp"
#include "redis/connection.hpp"
#include "redis/endpoint.hpp"
#include "redlimit/task.hpp"
#include "runtime/close_latch.hpp"
#include "runtime/completion.hpp"
#include "runtime/uv_handles.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

/// One pub/sub connection: handlers per channel, subscribed while they exist, subscribed again
/// after every reconnect. Given several servers (the nodes of a cluster, where messages reach
/// every node), it moves to the next one after a failed attempt or a lost connection. Messages
/// published while the connection is down are lost (pub/sub is fire-and-forget); users must treat a
/// message as a hint they can do without.
class Subscriber {
 public:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(std::string_view message)>;

  Subscriber(uv_loop_t* loop, std::vector<Endpoint> endpoints, ConnectionSettings settings,
             std::shared_ptr<spdlog::logger> logger);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  /// Calls `handler` with each message on `channel` (from the loop, inside hiredis: it must not
  /// destroy the subscriber) until unsubscribe(id). Connects and subscribes as needed.
  std::uint64_t subscribe(const std::string& channel, Handler handler);
  void unsubscribe(std::uint64_t id);
  /// Completes once the server has confirmed the subscription to `channel`; TimeoutError at
  /// `deadline`.
  Task<void> confirmed(std::string channel, Clock::time_point deadline);
  /// Unsubscribes everything, disconnects, closes every handle.
  Task<void> close();

 private:
  enum class State { idle, connecting, ready, backoff, closing, closed };
  struct Channel {
    std::map<std::uint64_t, Handler> handlers;
    bool confirmed = false;
    std::vector<std::stop_source*> waiters;  ///< confirmed() calls to wake on confirmation
  };

  static void on_connect(const redisAsyncContext* context, int status);
  static void on_disconnect(const redisAsyncContext* context, int status);
  static void on_auth_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_pubsub_reply(redisAsyncContext* context, void* reply, void* privdata);
  static void on_connect_timer(void* self);
  static void on_backoff_timer(void* self);

  void start_connect();
  void subscribe_all();
  void send_subscribe(const std::string& channel);
  void attempt_failed(const std::string& why);
  void drop_context();
  void lost(const std::string& why);
  void wake_waiters(Channel& channel);
  /// The server in use, or the one to try next.
  const Endpoint& endpoint() const noexcept { return endpoints_[current_]; }

  uv_loop_t* loop_;
  std::vector<Endpoint> endpoints_;
  std::size_t current_ = 0;
  ConnectionSettings settings_;
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<CloseLatch> latch_ = std::make_shared<CloseLatch>();
  Timer connect_timer_;
  Timer backoff_timer_;
  Backoff backoff_;
  std::string command_buffer_;  ///< RESP encoding of the command being sent, reused
  State state_ = State::idle;
  bool refusal_logged_ = false;  ///< a refused SUBSCRIBE is logged once, not once per channel
  redisAsyncContext* context_ = nullptr;  ///< owned; freed with redisAsyncFree, or by hiredis
  std::map<std::string, Channel> channels_;
  std::map<std::uint64_t, std::string> channel_of_;  ///< subscription id -> channel
  std::uint64_t next_id_ = 1;
  Completion closed_;  ///< a second close() waits for the first
};

}  // namespace redlimit::detail

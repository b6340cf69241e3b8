#pragma once

#include <chrono>
#include <string>

#include "redlimit/metrics.hpp"

namespace redlimit::detail {

struct RedisMetrics;

/// Keeps calls from each waiting a full timeout while a Redis server is known to be down; the
/// CommandDispatcher keeps one per server, and a BreakerScope consults it for a script call.
/// Closed: every call goes to the server. After `failures_to_open` consecutive failures it opens:
/// calls fail at once with CircuitOpen (a limiter then applies its failure policy). When the open
/// period ends, one call goes through as a probe (half-open): success closes the breaker, failure
/// opens it again for twice as long (up to `open_max`). The open period bounds how long recovery
/// takes once Redis is back.
///
/// Given a RedisMetrics, it counts itself in RedisMetrics::breakers under its state from its
/// construction to its destruction. Why neither copyable nor movable: each object counts once.
class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  struct Settings {
    int failures_to_open = 3;
    std::chrono::milliseconds open_min{50};
    std::chrono::milliseconds open_max{500};
    /// A probe that reported nothing within this (its task was destroyed) counts as lost: the
    /// next call probes again. At least the client's command timeout.
    std::chrono::milliseconds probe_timeout{1000};
    /// The server it guards, for logs and errors.
    std::string server = {};
  };

  CircuitBreaker() : CircuitBreaker(Settings{}) {}
  /// `metrics` (null: counts nowhere) must outlive the breaker.
  explicit CircuitBreaker(Settings settings, RedisMetrics* metrics = nullptr);
  ~CircuitBreaker();
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  /// Whether a call may go to Redis now (in half-open, only the probe may).
  bool allow(Clock::time_point now);
  /// Redis answered (with a decision or with an error reply: either way it is there).
  void success();
  void failure(Clock::time_point now);
  /// How long until a call may go to Redis again (0 when closed).
  Clock::duration retry_in(Clock::time_point now) const;
  /// True unless closed (open, or half-open with a probe under way).
  bool open() const noexcept { return state_ != State::closed; }
  /// Settings::server.
  const std::string& server() const noexcept { return settings_.server; }

 private:
  using State = BreakerState;
  /// Moves to `next`, and the count of the metrics with it.
  void enter(State next) noexcept;

  Settings settings_;
  RedisMetrics* metrics_;
  State state_ = State::closed;
  int failures_ = 0;
  Clock::duration open_for_{};
  Clock::time_point open_until_{};
  Clock::time_point probe_sent_{};
};

}  // namespace redlimit::detail

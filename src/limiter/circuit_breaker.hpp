#pragma once

#include <chrono>
#include <string_view>

namespace redlimit::detail {

/// Keeps calls from each waiting a full timeout while Redis is known to be down. Closed: every
/// call goes to Redis. After `failures_to_open` consecutive failures it opens: calls get their
/// failure policy at once. When the open period ends, one call goes through as a probe
/// (half-open): success closes the breaker, failure opens it again for twice as long (up to
/// `open_max`). The open period bounds how long recovery takes once Redis is back.
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
  };

  CircuitBreaker() = default;
  explicit CircuitBreaker(Settings settings) : settings_(settings) {}

  /// Whether a call may go to Redis now (in half-open, only the probe may).
  bool allow(Clock::time_point now);
  /// Redis answered (with a decision or with an error reply: either way it is there).
  void success();
  void failure(Clock::time_point now);
  /// How long until a call may go to Redis again (0 when closed).
  Clock::duration retry_in(Clock::time_point now) const;
  bool open() const noexcept { return state_ != State::closed; }

 private:
  enum class State { closed, open, half_open };
  Settings settings_;
  State state_ = State::closed;
  int failures_ = 0;
  Clock::duration open_for_{};
  Clock::time_point open_until_{};
  Clock::time_point probe_sent_{};
};

/// The breakers of one client, one per Redis server: in a cluster, one node's outage must not
/// stop the calls that go to the others.
class BreakerDirectory {
 public:
  virtual ~BreakerDirectory() = default;
  /// The breaker of the server that holds `key` now.
  virtual CircuitBreaker& breaker_for(std::string_view key) = 0;
};

}  // namespace redlimit::detail

#pragma once

#include <exception>

#include "redis/circuit_breaker.hpp"
#include "redlimit/reply.hpp"

namespace spdlog {
class logger;
}

namespace redlimit::detail {

/// The circuit breaker's part in one script call. Entered before the call is sent, it refuses
/// the call at once (CircuitOpen) while the breaker is open; left with how the call ended, it
/// records that in the breaker. Without a breaker (a call that is not guarded) it does nothing.
///
/// Why nothing on destruction: a call whose task is destroyed mid-flight reports nothing, and
/// the breaker counts a probe that never reported as lost (Settings::probe_timeout).
class BreakerScope {
 public:
  using Clock = CircuitBreaker::Clock;

  /// Not guarded.
  BreakerScope() = default;
  /// Enters `breaker`, which must outlive the scope: throws CircuitOpen if it refuses the call.
  /// Transitions are logged to `logger`, which must outlive the scope too.
  BreakerScope(CircuitBreaker& breaker, spdlog::logger& logger);

  /// The server answered (whatever it answered): it is there.
  void answered();
  /// Leaves the scope with the call's `failure`, or else its `reply`: an Unavailable failure
  /// or a transient error reply counts as a failure, anything else as an answer. A failure
  /// that leaves the breaker open is replaced by CircuitOpen, carrying when the server will be
  /// tried again.
  void leave(std::exception_ptr& failure, const Reply& reply);

 private:
  CircuitBreaker* breaker_ = nullptr;
  spdlog::logger* logger_ = nullptr;
};

}  // namespace redlimit::detail

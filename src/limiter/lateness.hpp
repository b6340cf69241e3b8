#pragma once

#include <chrono>
#include <cstdint>

#include "limiter/owned_acquire_options.hpp"

namespace redlimit::detail {

/// AcquireOptions::max_lateness for one call to Redis: whether the permits it admitted would be
/// used too long after the time Redis admitted them for.
///
/// Why measured from the sending: Redis decided after the call was sent, so the permits' time
/// came no earlier than their wait after it. The answer's own delay (a WAIT for replicas held
/// it, the network or the server stalled) counts in full; so does a wait in the client's queue
/// before the call left, which can only make a call look later than it is (permits not used,
/// never permits used late).
class Lateness {
 public:
  using Clock = std::chrono::steady_clock;

  /// A call sent now.
  explicit Lateness(std::chrono::microseconds max_lateness) noexcept
      : max_lateness_(max_lateness), sent_(Clock::now()) {}

  /// Whether permits admitted for `wait_us` after Redis decided (0: at once), used now, may be
  /// used later than max_lateness after their time.
  bool too_late(std::int64_t wait_us = 0) const noexcept {
    return since(sent_) - std::chrono::microseconds(wait_us) > max_lateness_;
  }

 private:
  std::chrono::microseconds max_lateness_;
  Clock::time_point sent_;
};

}  // namespace redlimit::detail

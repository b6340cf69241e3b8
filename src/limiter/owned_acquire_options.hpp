#pragma once

#include <chrono>
#include <stop_token>

#include "redlimit/acquire_options.hpp"
#include "runtime/forward_stop.hpp"

namespace redlimit::detail {

/// AcquireOptions as a waiting coroutine keeps them: with its own copy of the stop token.
///
/// Why a constructor: AcquireOptions only refers to the caller's token, which may be a
/// temporary that dies when the acquire() call returns; this copy is taken during the call.
/// A type with a user-provided constructor is also not among those g++ 12 destroys twice
/// when built inside a co_await expression.
struct OwnedAcquireOptions {
  explicit OwnedAcquireOptions(const AcquireOptions& options)
      : max_wait(options.max_wait),
        max_lateness(options.max_lateness),
        stop(options.stop.token()) {}

  std::chrono::microseconds max_wait;
  std::chrono::microseconds max_lateness;
  std::stop_token stop;
  /// Set to true when the call suspends to wait for its permits (a DecisionEventKind::waited);
  /// null when nobody asks.
  bool* slept = nullptr;
};

/// The time since `start`: what a call waited (Decision::waited).
inline std::chrono::microseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace redlimit::detail

#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace redlimit::detail {

/// Reconnect delays: the n-th consecutive failure waits a random time in [cap/2, cap] with
/// cap = min(max, min * 2^n), and never less than min ("equal jitter": spread out, never 0).
class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, std::uint64_t seed);
  /// The delay before the next attempt; each call counts one more failure.
  std::chrono::milliseconds next();
  /// After a success: the next failure starts again from min.
  void reset() noexcept { failures_ = 0; }
  int failures() const noexcept { return failures_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  int failures_ = 0;
  std::mt19937_64 random_;
};

}  // namespace redlimit::detail

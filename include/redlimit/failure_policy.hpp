#pragma once
/// @file failure_policy.hpp
/// FailurePolicy: what a limiter answers when Redis cannot answer in time.

namespace redlimit {

/// What a limiter answers when Redis cannot answer in time.
struct FailurePolicy {
  /// The answer while Redis is unavailable.
  enum class Kind {
    fail_closed,     ///< deny (the default)
    fail_open,       ///< allow
    local_fallback,  ///< decide in process with local_share x each limit until Redis answers
  };
  /// `FailurePolicy::fail_open` and the like name the kinds.
  using enum Kind;

  /// The answer while Redis is unavailable.
  Kind kind = fail_closed;
  /// local_fallback: the share of each limit this process may grant on its own, in (0, 1].
  double local_share = 1.0;
};

}  // namespace redlimit

#pragma once

#include <cstdint>

namespace redlimit::detail {

/// What one limit answers for one request; the C++ models and the Lua scripts compute the same.
struct LimitOutcome {
  bool allowed = false;
  std::int64_t limit = 0;           ///< capacity: burst, queue size or permits per window
  std::int64_t remaining = 0;       ///< permits left after this decision (never negative)
  std::int64_t retry_after_us = 0;  ///< 0 when allowed; else > 0
  std::int64_t reset_after_us = 0;  ///< time until the limit is idle again
  std::int64_t idle_after_us = 0;   ///< the same from the state before this decision (peek's)
  std::int64_t now_us = 0;          ///< the time the limit used: now
  std::int64_t ttl_us = 0;          ///< allowed or rewritten: how long the new state matters
  /// The state was stamped with other parameters (or none) and was carried over, or held a time
  /// beyond what the policy stores at now (a clock step back) and was clamped: it is written
  /// back even though the request was denied (never on peek).
  bool rewritten = false;
  /// The state's policy version, when newer than the request's: the request was refused.
  std::int64_t stale_version = 0;
};

}  // namespace redlimit::detail

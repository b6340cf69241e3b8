#pragma once
// How the window algorithms carry a stored count over to changed parameters
// (docs/algorithms.md, "Changing a policy"); lua/lib/window_carry.lua is its twin.

#include <cstdint>
#include <optional>

#include "algorithms/exact.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// A count admitted under a limit of `old_limit`, as it counts under `new_limit`: kept as is,
/// scaled by new_limit / old_limit rounding up, or zeroed.
inline std::int64_t carried_count(std::int64_t count, std::int64_t old_limit,
                                  std::int64_t new_limit, Carry carry) noexcept {
  switch (carry) {
    case Carry::as_is:
      return count;
    case Carry::proportional:
      return mul_div_ceil(count, new_limit, old_limit);
    case Carry::reset:
      return 0;
  }
  return count;
}

/// Whether [a_start, a_start + a_length) and [b_start, b_start + b_length) share a time.
constexpr bool windows_overlap(std::int64_t a_start, std::int64_t a_length, std::int64_t b_start,
                               std::int64_t b_length) noexcept {
  return a_start < b_start + b_length && b_start < a_start + a_length;
}

/// The state's policy version when it refuses a request of `change` (newer than a request that
/// follows a store), else 0.
inline std::int64_t refused_by_version(const std::optional<Stamp>& stamp,
                                       const PolicyChange& change) noexcept {
  if (!stamp || change.policy_version == 0) return 0;
  return stamp->policy_version > change.policy_version ? stamp->policy_version : 0;
}

/// When a change takes effect for a decision at `now`: its time, or now when unknown or later.
constexpr std::int64_t change_time(const PolicyChange& change, std::int64_t now) noexcept {
  return change.since_us == 0 || change.since_us > now ? now : change.since_us;
}

}  // namespace redlimit::detail

#pragma once
// Random draws for the differential tests: a number in a range, and the policy epoch of a
// random policy change.

#include <algorithm>
#include <cstdint>
#include <random>

#include "limiter/compiled_policy.hpp"

namespace redlimit::test {

/// A number drawn uniformly from [low, high].
inline std::int64_t pick(std::mt19937_64& random, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random);
}

/// The epoch of a random policy change at `now` on limits of `period_us`: a version that mostly
/// grows but sometimes goes back (the scripts refuse it as stale on keys written under a newer
/// one; 0 never is), `version` updated; a random carry; a since unknown (the decision's now),
/// later than now, or up to two periods before it.
inline detail::PolicyEpoch random_epoch(std::mt19937_64& random, std::int64_t now,
                                        std::int64_t period_us, std::int64_t& version) {
  switch (pick(random, 0, 5)) {
    case 0:
      version = 0;
      break;
    case 1:
      version = std::max<std::int64_t>(0, version - 2);
      break;
    default:
      version += pick(random, 1, 3);
  }
  detail::PolicyEpoch epoch{
      .version = version, .since_us = 0, .carry = static_cast<Carry>(pick(random, 0, 2))};
  switch (pick(random, 0, 3)) {
    case 0:
      break;  // unknown: the decision's now
    case 1:
      epoch.since_us = now + pick(random, 1, period_us);
      break;
    default:
      epoch.since_us = now - pick(random, 0, 2 * period_us);
  }
  return epoch;
}

}  // namespace redlimit::test

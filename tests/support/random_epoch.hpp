#pragma once
// Random draws for the differential tests: a number in a range, and the policy epoch of a
// random policy change.

#include <algorithm>
#include <cstdint>
#include <random>

#include "policy/compiled_policy.hpp"

namespace redlimit::test {

/// A number drawn uniformly from [low, high].
inline std::int64_t pick(std::mt19937_64& random, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random);
}

/// What the epochs of one sequence's policy changes are drawn from, and what the draws so far
/// left.
struct EpochDraws {
  /// The sequence's limiters follow no store (every version 0, as set_policy() sends), else they
  /// follow a store (versions that mostly grow, and sometimes 0).
  bool fixed = false;
  std::int64_t version = 0;         ///< the policy version drawn last
  std::int64_t reset_since_us = 0;  ///< the since of the last version-0 reset drawn (0: none)
};

/// The draws of a new sequence: its limiters follow no store in one sequence in four; those that
/// follow one start from a version up to 3 (so that a version going back is mostly not 0).
inline EpochDraws random_draws(std::mt19937_64& random) {
  if (pick(random, 0, 3) == 0) return EpochDraws{.fixed = true};
  return EpochDraws{.fixed = false, .version = pick(random, 0, 3)};
}

/// The epoch of a change at `now` by a limiter that follows no store (version 0): mostly
/// set_policy() with Carry::reset, its since before now, after it (a Redis clock behind the
/// client's), or that of the last reset again (the resetting limiter's calls after another
/// process's); else another process of the same name that never reset (as_is, since unknown),
/// or a random carry.
inline detail::PolicyEpoch fixed_epoch(std::mt19937_64& random, std::int64_t now,
                                       std::int64_t period_us, EpochDraws& draws) {
  detail::PolicyEpoch epoch{.version = 0, .since_us = 0, .carry = Carry::reset};
  switch (pick(random, 0, 5)) {
    case 0:
      epoch.carry = Carry::as_is;
      return epoch;
    case 1:
      epoch.carry = static_cast<Carry>(pick(random, 0, 2));
      epoch.since_us = now - pick(random, 0, 2 * period_us);
      return epoch;
    case 2:
      if (draws.reset_since_us != 0) {
        epoch.since_us = draws.reset_since_us;
        return epoch;
      }
      epoch.since_us = now - pick(random, 0, 2 * period_us);
      break;
    case 3:
      epoch.since_us = now + pick(random, 1, period_us);
      break;
    default:
      epoch.since_us = now - pick(random, 0, 2 * period_us);
  }
  draws.reset_since_us = epoch.since_us;
  return epoch;
}

/// The epoch of a random policy change at `now` on limits of `period_us`. Limiters that follow
/// no store draw fixed_epoch(). Those that follow a store draw a version that mostly grows but
/// sometimes goes back (the scripts refuse it as stale on keys written under a newer one; 0
/// never is), a random carry, and a since unknown (the decision's now), later than now, or up to
/// two periods before it.
inline detail::PolicyEpoch random_epoch(std::mt19937_64& random, std::int64_t now,
                                        std::int64_t period_us, EpochDraws& draws) {
  if (draws.fixed) return fixed_epoch(random, now, period_us, draws);
  switch (pick(random, 0, 4)) {
    case 0:
      draws.version = 0;
      break;
    case 1:
      draws.version = std::max<std::int64_t>(0, draws.version - 2);
      break;
    default:
      draws.version += pick(random, 1, 3);
  }
  detail::PolicyEpoch epoch{
      .version = draws.version, .since_us = 0, .carry = static_cast<Carry>(pick(random, 0, 2))};
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

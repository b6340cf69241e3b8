#pragma once
// Leaky bucket (a shaper): the model of lua/algorithms/leaky_bucket.lua.

#include <algorithm>
#include <cstdint>

#include "algorithms/gcra.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// Departures d/p microseconds apart (lowest terms); at most `burst` permits queued.
using LeakyBucketParams = GcraParams;

/// The time the next departure may leave (same shape as the GCRA state).
using LeakyBucketState = GcraState;

/// The permits a leaky bucket has left when its next departure is `ahead` of now: burst less
/// ceil(ahead / T), at least 0. Why the first test: a debt (Limiter::penalize, block) may lie
/// far beyond burst x T, where ahead x p would overflow.
inline std::int64_t leaky_remaining(FracTime ahead, const LeakyBucketParams& params) {
  if (ahead.us > scaled(params.burst, params.d, params.p).us) return 0;
  return std::max<std::int64_t>(
      0, params.burst - ceil_div(ahead.us * params.p + ahead.frac, params.d));
}

LimitOutcome decide_leaky_bucket(const LeakyBucketParams& params, const PolicyChange& change,
                                 const LeakyBucketState* state, std::int64_t now, std::int64_t n,
                                 LeakyBucketState* next);

}  // namespace redlimit::detail

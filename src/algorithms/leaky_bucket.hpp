#pragma once
// Leaky bucket (a shaper): the model of lua/algorithms/leaky_bucket.lua.

#include <cstdint>

#include "algorithms/gcra.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// Departures d/p microseconds apart (lowest terms); at most `burst` permits queued.
using LeakyBucketParams = GcraParams;

/// The time the next departure may leave (same shape as the GCRA state).
using LeakyBucketState = GcraState;

LimitOutcome decide_leaky_bucket(const LeakyBucketParams& params, const PolicyChange& change,
                                 const LeakyBucketState* state, std::int64_t now, std::int64_t n,
                                 LeakyBucketState* next);

}  // namespace redlimit::detail

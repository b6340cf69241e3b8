#pragma once

#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// The policy a local_fallback limiter applies in process while Redis cannot answer: every limit
/// with `share` (in (0, 1]) of its rate and capacity, rounded down, but a capacity of 1 permit
/// at least (a window's limit is its capacity).
///
/// A bucket limit (gcra, token_bucket, leaky_bucket) gets a period that is a multiple of its
/// rate's reduced period, long enough that a slow rate is still scaled and short enough that the
/// scaled limit is as exact in the scripts' arithmetic as the original (burst x reduced period
/// <= 2^52): any policy a Limiter accepts has a fallback it accepts too.
Policy fallback_policy(const Policy& policy, double share);

}  // namespace redlimit::detail

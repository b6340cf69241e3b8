#include "algorithms/token_bucket.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const TokenBucketState* state,
                                 std::int64_t now, std::int64_t n, TokenBucketState* next) {
  const std::int64_t full = params.burst * params.d;
  std::int64_t level = full;
  std::int64_t last = now;
  if (state != nullptr) {
    level = state->level;
    last = state->last_us;
    // A state counted in another unit keeps its tokens, rounded down (never adds any).
    if (state->den != params.d) level = mul_div(level, params.d, state->den).quotient;
    level = std::min(level, full);
  }
  const std::int64_t t = std::max(now, last);
  const std::int64_t missing = full - level;
  if (missing > 0) {
    const std::int64_t elapsed = t - last;
    level = elapsed >= ceil_div(missing, params.p) ? full : level + elapsed * params.p;
  }

  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = t;
  const std::int64_t cost = n * params.d;
  out.allowed = level >= cost;
  if (out.allowed) {
    const std::int64_t left = level - cost;
    out.remaining = floor_div(left, params.d);
    out.reset_after_us = ceil_div(full - left, params.p);
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = TokenBucketState{left, t, params.d};
  } else {
    out.remaining = floor_div(level, params.d);
    out.retry_after_us = ceil_div(cost - level, params.p);
    out.reset_after_us = ceil_div(full - level, params.p);
  }
  return out;
}

}  // namespace redlimit::detail

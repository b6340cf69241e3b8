#include "algorithms/token_bucket.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {

Tokens load_tokens(const TokenBucketParams& params, const TokenBucketState* state,
                   std::int64_t now) {
  const std::int64_t full = params.burst * params.d;
  std::int64_t level = full;
  std::int64_t last = now;
  if (state != nullptr) {
    level = state->level;
    last = state->last_us;
    // A level counted in another unit keeps its whole tokens (or its whole debt, rounded up).
    if (state->den != params.d) {
      if (level >= 0) {
        const std::int64_t tokens = level / state->den;
        level = static_cast<Int128>(tokens) * params.d >= full ? full : tokens * params.d;
      } else {
        const std::int64_t debt = ceil_div(-level, state->den);
        level = debt > max_debt(full) / params.d ? -max_debt(full) : -debt * params.d;
      }
    }
    level = std::min(level, full);
  }
  const std::int64_t t = std::max(now, last);
  const std::int64_t missing = full - level;
  if (missing > 0) {
    const std::int64_t elapsed = t - last;
    level = elapsed >= ceil_div(missing, params.p) ? full : level + elapsed * params.p;
  }
  return {level, t};
}

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const PolicyChange&,
                                 const TokenBucketState* state, std::int64_t now, std::int64_t n,
                                 TokenBucketState* next) {
  const std::int64_t full = params.burst * params.d;
  const auto [level, t] = load_tokens(params, state, now);

  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = t;
  const std::int64_t lag = t - now;  // after a clock step back, times count from now, not from t
  const std::int64_t cost = n * params.d;
  out.allowed = level >= cost;
  out.idle_after_us = ceil_div(full - level, params.p) + lag;
  if (out.allowed) {
    const std::int64_t left = level - cost;
    out.remaining = floor_div(left, params.d);
    out.reset_after_us = ceil_div(full - left, params.p) + lag;
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : TokenBucketState{};
      next->level = left;  // the reservation bookkeeping stays
      next->last_us = t;
      next->den = params.d;
    }
  } else {
    out.remaining = level > 0 ? floor_div(level, params.d) : 0;
    out.retry_after_us = ceil_div(cost - level, params.p) + lag;
    out.reset_after_us = out.idle_after_us;
  }
  return out;
}

}  // namespace redlimit::detail

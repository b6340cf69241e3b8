#include "algorithms/leaky_bucket.hpp"

#include <algorithm>

namespace redlimit::detail {

LimitOutcome decide_leaky_bucket(const LeakyBucketParams& params, const PolicyChange&,
                                 const LeakyBucketState* state, std::int64_t now, std::int64_t n,
                                 LeakyBucketState* next) {
  const std::int64_t p = params.p;
  const FracTime next_free = load_frac_time(state, now, p);
  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = now;
  out.allowed = next_free == FracTime{now, 0};  // the request can leave now
  if (out.allowed) {
    const FracTime step = scaled(n, params.d, p);
    out.remaining = params.burst - n;
    out.ttl_us = step.ceil_us();
    out.reset_after_us = out.ttl_us;
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : LeakyBucketState{};
      next->tat = add({now, 0}, step, p);  // the reservation bookkeeping stays
      next->den = p;
    }
    return out;
  }
  const FracTime wait = subtract(next_free, {now, 0}, p);
  // Permits queued ahead: ceil(wait / T); more than the queue can hold only after a clock step.
  const FracTime capacity = scaled(params.burst, params.d, p);
  if (wait.us <= capacity.us) {
    const std::int64_t queued = ceil_div(wait.us * p + wait.frac, params.d);
    out.remaining = std::max<std::int64_t>(0, params.burst - queued);
  }
  out.retry_after_us = wait.ceil_us();
  out.reset_after_us = out.retry_after_us;
  out.idle_after_us = out.retry_after_us;
  return out;
}

}  // namespace redlimit::detail

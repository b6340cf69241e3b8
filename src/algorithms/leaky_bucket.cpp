#include "algorithms/leaky_bucket.hpp"

#include <algorithm>

namespace redlimit::detail {

LimitOutcome decide_leaky_bucket(const LeakyBucketParams& params, const PolicyChange& change,
                                 const LeakyBucketState* state, std::int64_t now, std::int64_t n,
                                 LeakyBucketState* next) {
  const std::int64_t p = params.p;
  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = now;
  const LoadedTime loaded = load_frac_time(params, change, state, now, StoredTime::next_departure);
  if (loaded.stale_version != 0) {
    out.stale_version = loaded.stale_version;
    return out;
  }
  out.rewritten = loaded.rewritten;
  const FracTime next_free = loaded.time;
  out.allowed = next_free == FracTime{now, 0};  // the request can leave now
  FracTime written = next_free;
  if (out.allowed) {
    const FracTime step = scaled(n, params.d, p);
    out.remaining = params.burst - n;
    out.reset_after_us = step.ceil_us();
    written = add({now, 0}, step, p);  // it leaves now and occupies the next n*T
  } else {
    const FracTime wait = subtract(next_free, {now, 0}, p);
    out.remaining = leaky_remaining(wait, params);
    out.retry_after_us = wait.ceil_us();
    out.reset_after_us = out.retry_after_us;
    out.idle_after_us = out.retry_after_us;
  }
  if (out.allowed || out.rewritten || n == 0) {
    out.ttl_us = std::max<std::int64_t>(1, subtract(written, {now, 0}, p).ceil_us());
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : LeakyBucketState{};
      next->tat = written;  // the reservation bookkeeping stays
      next->den = p;
      next->stamp = stamp_of(params, loaded.stamp_version);
      next->written_us = now;
    }
  }
  return out;
}

}  // namespace redlimit::detail

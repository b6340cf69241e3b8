#include "algorithms/gcra.hpp"

namespace redlimit::detail {

FracTime load_frac_time(const GcraState* state, std::int64_t now, std::int64_t p) {
  const FracTime floor_now{now, 0};
  if (state == nullptr) return floor_now;
  FracTime stored = state->tat;
  if (state->den != p) stored = {stored.ceil_us(), 0};
  return floor_now < stored ? stored : floor_now;
}

LimitOutcome decide_gcra(const GcraParams& params, const PolicyChange&, const GcraState* state,
                         std::int64_t now, std::int64_t n, GcraState* next) {
  const std::int64_t p = params.p;
  const FracTime tat = load_frac_time(state, now, p);
  const FracTime after = add(tat, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  const FracTime latest{now + capacity.us, capacity.frac};  // now + tau

  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = now;
  out.allowed = after <= latest;
  out.idle_after_us = subtract(tat, {now, 0}, p).ceil_us();
  const FracTime left = out.allowed ? after : tat;
  // A TAT far ahead (a long queue, or another policy's state) leaves nothing.
  const Int128 room = static_cast<Int128>(latest.us - left.us) * p + latest.frac - left.frac;
  out.remaining = room > 0 ? static_cast<std::int64_t>(room / params.d) : 0;
  if (out.allowed) {
    out.ttl_us = subtract(after, {now, 0}, p).ceil_us();
    out.reset_after_us = out.ttl_us;
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : GcraState{};
      next->tat = after;  // the reservation bookkeeping stays
      next->den = p;
    }
  } else {
    out.retry_after_us = subtract(after, latest, p).ceil_us();
    out.reset_after_us = out.idle_after_us;
  }
  return out;
}

}  // namespace redlimit::detail

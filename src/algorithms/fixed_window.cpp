#include "algorithms/fixed_window.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {

LimitOutcome decide_fixed_window(const FixedWindowParams& params, const PolicyChange&,
                                 const FixedWindowState* state, std::int64_t now, std::int64_t n,
                                 FixedWindowState* next) {
  const std::int64_t t = state != nullptr ? std::max(now, state->start_us) : now;
  std::int64_t start = 0;
  std::int64_t count = 0;
  if (params.anchored) {
    if (state != nullptr && t < state->start_us + params.period_us) {
      start = state->start_us;
      count = state->count;
    } else {
      start = t;
    }
  } else {
    start = floor_div(t, params.period_us) * params.period_us;
    // A stored window that began inside this one (the period grew) still counts.
    if (state != nullptr && state->start_us >= start) count = state->count;
  }

  LimitOutcome out;
  out.limit = params.limit;
  out.now_us = t;
  out.reset_after_us = start + params.period_us - now;  // from now, also after a clock step back
  out.allowed = count + n <= params.limit;
  out.idle_after_us = count > 0 ? out.reset_after_us : 0;
  if (out.allowed) {
    out.remaining = params.limit - count - n;
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = FixedWindowState{start, count + n};
  } else {
    out.remaining = std::max<std::int64_t>(0, params.limit - count);
    out.retry_after_us = out.reset_after_us;
  }
  return out;
}

}  // namespace redlimit::detail

#include "algorithms/sliding_window_counter.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {
namespace {

/// The first time after the start of a window at which count - floor(count * e / P) <= room,
/// for count > room >= 0: ceil((count - room) * P / count).
std::int64_t decayed_enough_at(std::int64_t count, std::int64_t room, std::int64_t period) {
  return mul_div_ceil(count - room, period, count);
}

}  // namespace

LimitOutcome decide_sliding_window_counter(const SlidingWindowCounterParams& params,
                                           const PolicyChange&,
                                           const SlidingWindowCounterState* state, std::int64_t now,
                                           std::int64_t n, SlidingWindowCounterState* next) {
  const std::int64_t period = params.period_us;
  const std::int64_t t = state != nullptr ? std::max(now, state->start_us) : now;
  const std::int64_t start = floor_div(t, period) * period;
  std::int64_t current = 0;
  std::int64_t previous = 0;
  if (state != nullptr) {
    if (state->start_us == start) {
      current = state->current;
      previous = state->previous;
    } else if (state->start_us > start) {
      current = state->current + state->previous;  // the period grew: count all of it as current
    } else if (state->start_us == start - period) {
      previous = state->current;
    } else if (state->start_us > start - period) {
      previous = state->current + state->previous;  // the period changed
    }
  }
  const std::int64_t elapsed = t - start;
  const std::int64_t lag = t - now;  // after a clock step back, times count from now, not from t
  const std::int64_t weighted = previous - mul_div(previous, elapsed, period).quotient;
  const std::int64_t used = weighted + current;

  LimitOutcome out;
  out.limit = params.limit;
  out.now_us = t;
  out.allowed = used + n <= params.limit;
  if (current > 0) {
    out.idle_after_us = 2 * period - elapsed + lag;
  } else if (previous > 0) {
    out.idle_after_us = period - elapsed + lag;
  }
  if (out.allowed) {
    out.remaining = params.limit - used - n;
    out.reset_after_us = 2 * period - elapsed + lag;
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = SlidingWindowCounterState{start, current + n, previous};
    return out;
  }
  out.remaining = std::max<std::int64_t>(0, params.limit - used);
  // Later in this window, as the previous window's weight decays...
  const std::int64_t room = params.limit - current - n;
  if (room >= 0) {
    const std::int64_t at = decayed_enough_at(previous, room, period);
    if (at < period) out.retry_after_us = at - elapsed;
  }
  // ...or in the next window, where this window's count is the one that decays.
  if (out.retry_after_us == 0) {
    const std::int64_t room_next = params.limit - n;
    if (current <= room_next) {
      out.retry_after_us = period - elapsed;
    } else {
      const std::int64_t at = decayed_enough_at(current, room_next, period);
      out.retry_after_us = at < period ? period - elapsed + at : 2 * period - elapsed;
    }
  }
  out.reset_after_us = current > 0 ? 2 * period - elapsed : (previous > 0 ? period - elapsed : 0);
  out.retry_after_us += lag;
  out.reset_after_us += lag;
  return out;
}

}  // namespace redlimit::detail

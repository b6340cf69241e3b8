#include "algorithms/sliding_window_log.hpp"

#include <algorithm>

namespace redlimit::detail {

LimitOutcome decide_sliding_window_log(const SlidingWindowLogParams& params, const PolicyChange&,
                                       const SlidingWindowLogState* state, std::int64_t now,
                                       std::int64_t n, SlidingWindowLogState* next) {
  static const SlidingWindowLogState empty;
  const auto& times = state != nullptr ? state->times : empty.times;
  const std::int64_t t = times.empty() ? now : std::max(now, times.back());
  const std::int64_t outside = t - params.window_us;  // permits at or before this have left
  const auto first_inside = std::upper_bound(times.begin(), times.end(), outside);
  const auto count = static_cast<std::int64_t>(times.end() - first_inside);

  LimitOutcome out;
  out.limit = params.limit;
  out.now_us = t;
  out.allowed = count + n <= params.limit;
  if (count > 0) out.idle_after_us = times.back() + params.window_us - now;
  if (out.allowed) {
    out.remaining = params.limit - count - n;
    out.reset_after_us = t + params.window_us - now;  // from now, also after a clock step back
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) {
      const auto dropped = first_inside - times.begin();
      if (next != state) *next = state != nullptr ? *state : empty;
      next->times.erase(next->times.begin(), next->times.begin() + dropped);
      next->times.insert(next->times.end(), static_cast<std::size_t>(n), t);
    }
    return out;
  }
  out.remaining = std::max<std::int64_t>(0, params.limit - count);
  // The request fits once the (count + n - limit)-th oldest permit in the window has left.
  const std::int64_t must_leave = count + n - params.limit;
  out.retry_after_us = *(first_inside + (must_leave - 1)) + params.window_us - now;
  out.reset_after_us = times.back() + params.window_us - now;
  return out;
}

}  // namespace redlimit::detail

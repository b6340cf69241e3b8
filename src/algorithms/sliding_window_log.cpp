#include "algorithms/sliding_window_log.hpp"

#include <algorithm>

#include "algorithms/window_carry.hpp"

namespace redlimit::detail {

LimitOutcome decide_sliding_window_log(const SlidingWindowLogParams& params,
                                       const PolicyChange& change,
                                       const SlidingWindowLogState* state, std::int64_t now,
                                       std::int64_t n, SlidingWindowLogState* next) {
  static const SlidingWindowLogState empty;
  const auto& times = state != nullptr ? state->times : empty.times;
  LimitOutcome out;
  out.limit = params.limit;
  const std::optional<Stamp> stored = state != nullptr ? state->stamp : std::nullopt;
  const StampRule rule =
      stamp_rule(change, version_field(stored),
                 stored && (stored->a != params.limit || stored->b != params.window_us));
  out.stale_version = rule.stale_version;
  const Stamp stamp{params.limit, params.window_us, 0, rule.version};
  // A state restamped, or without a stamp, is carried over (a reset drops the times up to the
  // change, once: the rule tags it).
  const bool converting = state != nullptr && (rule.restamp || !stored);
  // Permits after now are a clock step back: taken as admitted now, and written back at now.
  const bool stepped = !times.empty() && times.back() > now;
  const auto at_most_now = [now](std::int64_t time) { return std::min(time, now); };
  std::int64_t outside = now - params.window_us;  // permits at or before this have left
  if (converting && rule.carry == Carry::reset)
    outside = std::max(outside, change_time(change, now));
  outside = std::max<std::int64_t>(outside, 0);  // score 0 is the stamp's in Redis
  const auto first_inside = std::upper_bound(times.begin(), times.end(), outside);
  const auto count = static_cast<std::int64_t>(times.end() - first_inside);

  out.now_us = now;
  if (out.stale_version != 0) return out;
  out.allowed = count + n <= params.limit;
  out.rewritten = converting || stepped;
  if (count > 0) out.idle_after_us = at_most_now(times.back()) + params.window_us - now;
  if (out.allowed) {
    out.remaining = params.limit - count - n;
    out.reset_after_us = params.window_us;
  } else {
    out.remaining = std::max<std::int64_t>(0, params.limit - count);
    // The request fits once the (count + n - limit)-th oldest permit in the window has left.
    const std::int64_t must_leave = count + n - params.limit;
    out.retry_after_us = at_most_now(*(first_inside + (must_leave - 1))) + params.window_us - now;
    out.reset_after_us = at_most_now(times.back()) + params.window_us - now;
  }
  if (!out.allowed && !out.rewritten && n != 0) return out;
  out.ttl_us = out.reset_after_us;
  if (next != nullptr) {
    const auto dropped = first_inside - times.begin();
    if (next != state) *next = state != nullptr ? *state : empty;
    next->times.erase(next->times.begin(), next->times.begin() + dropped);
    for (std::int64_t& time : next->times)
      time = at_most_now(time);
    if (out.allowed) next->times.insert(next->times.end(), static_cast<std::size_t>(n), now);
    next->stamp = stamp;
  }
  return out;
}

}  // namespace redlimit::detail

#include "algorithms/sliding_window_counter.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"
#include "algorithms/window_carry.hpp"

namespace redlimit::detail {
namespace {

/// The first time after the start of a window at which count - floor(count * e / P) <= room,
/// for count > room >= 0: ceil((count - room) * P / count).
std::int64_t decayed_enough_at(std::int64_t count, std::int64_t room, std::int64_t period) {
  return mul_div_ceil(count - room, period, count);
}

}  // namespace

LimitOutcome decide_sliding_window_counter(const SlidingWindowCounterParams& params,
                                           const PolicyChange& change,
                                           const SlidingWindowCounterState* state, std::int64_t now,
                                           std::int64_t n, SlidingWindowCounterState* next) {
  const std::int64_t period = params.period_us;
  LimitOutcome out;
  out.limit = params.limit;
  const std::optional<Stamp> stored = state != nullptr ? state->stamp : std::nullopt;
  const StampRule rule = stamp_rule(change, version_field(stored),
                                    stored && (stored->a != params.limit || stored->b != period));
  out.stale_version = rule.stale_version;
  const Stamp stamp{params.limit, period, 0, rule.version};
  // A state restamped, or without a stamp, is carried over.
  const bool converting = state != nullptr && (rule.restamp || !stored);
  // An old-format state was written under parameters nobody recorded: read as the current ones.
  const Stamp old = stored.value_or(stamp);
  // A window starting after now is a clock step back: taken as the window (of its period)
  // holding now, with both its counts.
  const bool stepped = state != nullptr && state->start_us > now;
  const std::int64_t start = floor_div(now, period) * period;
  std::int64_t current = 0;
  std::int64_t previous = 0;
  if (state != nullptr) {
    // Each stored window lands in the newest window it overlaps: this one or the one before.
    const auto land = [&](std::int64_t window_start, std::int64_t count) {
      if (converting) count = carried_count(count, old.a, params.limit, rule.carry);
      if (windows_overlap(window_start, old.b, start, period)) {
        current += count;
      } else if (windows_overlap(window_start, old.b, start - period, period)) {
        previous += count;
      }
    };
    const std::int64_t stored_start = stepped ? floor_div(now, old.b) * old.b : state->start_us;
    land(stored_start, state->current);
    land(stored_start - old.b, state->previous);
    // The state held two windows at since, the old one holding it and the one before; a stored
    // window that started after since was started by an old-version write, which rolled the
    // counters past one or both of them: each window lost so counts as full (the old limit).
    const std::int64_t since = change_time(change, now);
    const std::int64_t held = floor_div(since, old.b) * old.b;
    if (converting && state->stamp && stored_start > since) land(held - old.b, old.a);
    if (converting && state->stamp && stored_start - old.b > since) land(held, old.a);
    if (converting) {
      current = std::min(current, max_exact);
      previous = std::min(previous, max_exact);
    }
  }
  const std::int64_t elapsed = now - start;
  const std::int64_t weighted = previous - mul_div(previous, elapsed, period).quotient;
  const std::int64_t used = weighted + current;

  out.now_us = now;
  if (out.stale_version != 0) return out;
  out.allowed = used + n <= params.limit;
  out.rewritten = converting || stepped;
  if (current > 0) {
    out.idle_after_us = 2 * period - elapsed;
  } else if (previous > 0) {
    out.idle_after_us = period - elapsed;
  }
  if (out.allowed) {
    out.remaining = params.limit - used - n;
    out.reset_after_us = 2 * period - elapsed;
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = SlidingWindowCounterState{start, current + n, previous, stamp};
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
  if (out.rewritten || n == 0) {
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = SlidingWindowCounterState{start, current, previous, stamp};
  }
  return out;
}

}  // namespace redlimit::detail

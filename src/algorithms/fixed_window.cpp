#include "algorithms/fixed_window.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"
#include "algorithms/window_carry.hpp"

namespace redlimit::detail {

LimitOutcome decide_fixed_window(const FixedWindowParams& params, const PolicyChange& change,
                                 const FixedWindowState* state, std::int64_t now, std::int64_t n,
                                 FixedWindowState* next) {
  LimitOutcome out;
  out.limit = params.limit;
  const std::optional<Stamp> stored = state != nullptr ? state->stamp : std::nullopt;
  const std::int64_t anchored = params.anchored ? 1 : 0;
  const StampRule rule =
      stamp_rule(change, version_field(stored),
                 stored && (stored->a != params.limit || stored->b != params.period_us ||
                            stored->c != anchored));
  out.stale_version = rule.stale_version;
  const Stamp stamp{params.limit, params.period_us, anchored, rule.version};
  // A state restamped, or without a stamp, is carried over.
  const bool converting = state != nullptr && (rule.restamp || !stored);
  // An old-format state was written under parameters nobody recorded: read as the current ones.
  const Stamp old = stored.value_or(stamp);
  // A window starting after now is a clock step back: taken as one starting now, with its count.
  const bool stepped = state != nullptr && state->start_us > now;
  const std::int64_t stored_start = stepped ? now : (state != nullptr ? state->start_us : 0);
  std::int64_t start = 0;
  std::int64_t count = 0;
  if (params.anchored) {
    if (state != nullptr && now < stored_start + params.period_us) {
      start = stored_start;
      count = state->count;
    } else {
      start = now;
      // A stored window still open (the period shrank) carries its count into one starting now.
      if (converting && now < stored_start + old.b) count = state->count;
    }
  } else {
    start = floor_div(now, params.period_us) * params.period_us;
    if (state != nullptr && windows_overlap(stored_start, old.b, start, params.period_us)) {
      count = state->count;
    }
  }
  // A window that started after since was started by an old-version write (a process that had
  // not heard of the change yet), and the count of the old window that held since went with it.
  // That window was admitted before since: it counts as full (the old limit) where it meets the
  // new window holding now. Its start: aligned, the old period's multiple; anchored, the latest
  // it can have been, as it ended by the stored window's start. Its length: the old period; in
  // an anchored window, the new period (an anchored carry keeps a window's start).
  const std::int64_t since = change_time(change, now);
  if (converting && state->stamp && stored_start > since) {
    const std::int64_t from =
        old.c == 1 ? std::min(since, stored_start - old.b) : floor_div(since, old.b) * old.b;
    if (windows_overlap(from, params.anchored ? params.period_us : old.b, start, params.period_us))
      count = std::min(count + old.a, max_exact);
  }
  if (converting) count = carried_count(count, old.a, params.limit, rule.carry);

  out.now_us = now;
  out.reset_after_us = start + params.period_us - now;
  if (out.stale_version != 0) return out;
  out.allowed = count + n <= params.limit;
  out.rewritten = converting || stepped;
  out.idle_after_us = count > 0 ? out.reset_after_us : 0;
  if (out.allowed) {
    out.remaining = params.limit - count - n;
  } else {
    out.remaining = std::max<std::int64_t>(0, params.limit - count);
    out.retry_after_us = out.reset_after_us;
  }
  if (out.allowed || out.rewritten || n == 0) {
    out.ttl_us = out.reset_after_us;
    if (next != nullptr) *next = FixedWindowState{start, count + (out.allowed ? n : 0), stamp};
  }
  return out;
}

}  // namespace redlimit::detail

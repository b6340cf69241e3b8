#include "algorithms/adjustments.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {
namespace {

/// What one limit answers: a refusal, or the state to write (none: nothing to write) and how
/// long it matters.
struct LimitAdjustment {
  std::string refusal;
  std::optional<LimitState> state;
  std::int64_t ttl_us = 0;
  bool writes = true;
};

/// GCRA's TAT or the leaky bucket's next departure after the adjustment (lua/algorithms/gcra.lua
/// and leaky_bucket.lua, section adjust). `time` is the loaded one (at least now).
FracTime adjust_time(FracTime time, const GcraParams& params, Adjustment adjustment,
                     std::int64_t amount, std::int64_t now, std::int64_t elapsed, bool leaky) {
  const std::int64_t p = params.p;
  switch (adjustment) {
    case Adjustment::refund:
      return std::max(subtract(time, scaled(amount, params.d, p), p), FracTime{now, 0});
    case Adjustment::give_back: {
      // What the take may still hold: n*T less the time since.
      const FracTime step = scaled(amount, params.d, p);
      const FracTime back{step.us - elapsed, step.frac};
      return back.us < 0 ? time : std::max(subtract(time, back, p), FracTime{now, 0});
    }
    case Adjustment::penalize: {
      const FracTime later = add(time, scaled(amount, params.d, p), p);
      return later.us >= max_exact ? FracTime{max_exact, 0} : later;
    }
    case Adjustment::block: {
      const FracTime until{now + amount, 0};
      // GCRA: until + tau - T, when one permit passes; the leaky bucket: until, when it leaves.
      const FracTime from = leaky ? until : add(until, scaled(params.burst - 1, params.d, p), p);
      return std::max(time, from);
    }
  }
  return time;
}

/// How long `state` (of `spec`'s algorithm) matters from `now`: the TTL the adjust script
/// writes with it.
std::int64_t ttl_of(const LimitSpec& spec, const LimitState& state, std::int64_t now) {
  switch (spec.algorithm) {
    case Algorithm::gcra:
    case Algorithm::leaky_bucket:
      return std::max<std::int64_t>(
          1, subtract(std::get<GcraState>(state).tat, {now, 0}, spec.a).ceil_us());
    case Algorithm::token_bucket:
      return std::max<std::int64_t>(
          1, ceil_div(spec.c * spec.b - std::get<TokenBucketState>(state).level, spec.a));
    case Algorithm::fixed_window:
      return std::get<FixedWindowState>(state).start_us + spec.b - now;
    case Algorithm::sliding_window_counter:
      return 2 * spec.b - (now - std::get<SlidingWindowCounterState>(state).start_us);
    case Algorithm::sliding_window_log:
      return spec.b;
  }
  return 1;
}

/// The adjustment of one limit's loaded state (lua/algorithms/*.lua, section adjust).
/// `rewritten`: the state was carried over or stepped back as it loaded; a give_back then
/// returns nothing, since the time that returned the take cannot be told. Nor does it while a
/// request scheduled after the take keeps its slot (a bucket's slot ahead of now).
LimitAdjustment adjust_limit(const LimitSpec& spec, std::optional<LimitState> state,
                             std::int64_t now, Adjustment adjustment, std::int64_t amount,
                             std::int64_t taken_at, bool rewritten) {
  LimitAdjustment out;
  const bool giving = adjustment == Adjustment::give_back && taken_at <= now && !rewritten;
  const std::int64_t elapsed = std::max<std::int64_t>(0, now - taken_at);  // give_back
  switch (spec.algorithm) {
    case Algorithm::gcra:
    case Algorithm::leaky_bucket: {
      auto& loaded = std::get<GcraState>(*state);
      const std::int64_t p = spec.a, d = spec.b;
      // A request scheduled after the take keeps its slot (nothing moves it): gcra's slot ahead
      // of now (TAT - tau > now), the leaky bucket's next departure past the take's end.
      // Why only for give_back: a block's amount is a duration, and amount x d overflows.
      const auto scheduled_after = [&] {
        return spec.algorithm == Algorithm::gcra
                   ? FracTime{now, 0} < subtract(loaded.tat, scaled(spec.c, d, p), p)
                   : add({taken_at, 0}, scaled(amount, d, p), p) < loaded.tat;
      };
      if (adjustment != Adjustment::give_back || (giving && !scheduled_after())) {
        loaded.tat = adjust_time(loaded.tat, GcraParams{spec.a, spec.b, spec.c}, adjustment, amount,
                                 now, elapsed, spec.algorithm == Algorithm::leaky_bucket);
      }
      break;
    }
    case Algorithm::token_bucket: {
      const std::int64_t p = spec.a, d = spec.b, full = spec.c * spec.b;
      auto& loaded = std::get<TokenBucketState>(*state);
      if (adjustment == Adjustment::refund) {
        loaded.level = std::min(full, loaded.level + amount * d);
      } else if (adjustment == Adjustment::give_back) {
        const std::int64_t cost = amount * d;  // less the refill since
        if (giving && elapsed < ceil_div(cost, p) && loaded.level >= 0)
          loaded.level = std::min(full, loaded.level + cost - elapsed * p);
      } else if (adjustment == Adjustment::penalize) {
        loaded.level = std::max(full - max_exact, loaded.level - amount * d);
      } else {
        loaded.level = std::min(loaded.level, d - amount * p);
      }
      break;
    }
    case Algorithm::fixed_window: {
      auto& loaded = std::get<FixedWindowState>(*state);
      if (adjustment == Adjustment::give_back) {
        // The window holding now holds the take only if it began by then; else nothing.
        if (giving && loaded.start_us <= taken_at) {
          loaded.count -= std::min(amount, loaded.count);
        } else {
          out.writes = false;
        }
      } else if (adjustment == Adjustment::block) {
        out.refusal = "a fixed_window limit cannot block";
      } else if (adjustment == Adjustment::refund && loaded.count < amount) {
        out.refusal = "the current window holds fewer permits than refunded";
      } else {
        loaded.count += adjustment == Adjustment::refund ? -amount : amount;
      }
      break;
    }
    case Algorithm::sliding_window_counter: {
      auto& loaded = std::get<SlidingWindowCounterState>(*state);
      if (adjustment == Adjustment::give_back) {
        // From the window that holds the take: this one, or the one before.
        if (giving && loaded.start_us <= taken_at) {
          loaded.current -= std::min(amount, loaded.current);
        } else if (giving && loaded.start_us - spec.b <= taken_at) {
          loaded.previous -= std::min(amount, loaded.previous);
        }
      } else if (adjustment == Adjustment::block) {
        out.refusal = "a sliding_window_counter limit cannot block";
      } else if (adjustment == Adjustment::refund && loaded.current < amount) {
        out.refusal = "the current window holds fewer permits than refunded";
      } else {
        loaded.current += adjustment == Adjustment::refund ? -amount : amount;
      }
      break;
    }
    case Algorithm::sliding_window_log: {
      auto& times = std::get<SlidingWindowLogState>(*state).times;
      const auto count = static_cast<std::int64_t>(times.size());
      if (adjustment == Adjustment::refund) {
        if (count < amount) {
          out.refusal = "the window holds fewer permits than refunded";
        } else {
          times.erase(times.begin(), times.begin() + amount);  // the oldest leave
        }
      } else if (adjustment == Adjustment::give_back) {
        // The take's own permits: those admitted at its time.
        if (giving) {
          const auto [first, last] = std::equal_range(times.begin(), times.end(), taken_at);
          const auto gone = std::min<std::int64_t>(amount, last - first);
          times.erase(last - gone, last);
        }
      } else if (adjustment == Adjustment::penalize) {
        times.insert(times.end(), static_cast<std::size_t>(amount), now);
      } else {
        // `limit` permits admitted at until - window: they leave at until.
        const std::int64_t at = now + amount - spec.b;
        times.insert(std::upper_bound(times.begin(), times.end(), at),
                     static_cast<std::size_t>(spec.a), at);
      }
      break;
    }
  }
  if (!out.refusal.empty()) return out;
  out.ttl_us = ttl_of(spec, *state, now);
  out.state = std::move(state);
  return out;
}

}  // namespace

const char* adjustment_name(Adjustment adjustment) noexcept {
  switch (adjustment) {
    case Adjustment::refund:
      return "refund";
    case Adjustment::give_back:
      return "give_back";
    case Adjustment::penalize:
      return "penalize";
    case Adjustment::block:
      return "block";
  }
  return "";
}

AdjustOutcome adjust_policy(std::span<const LimitSpec> limits,
                            std::span<std::optional<LimitState>> states, std::int64_t now,
                            Adjustment adjustment, std::int64_t amount, PolicyChange change,
                            std::int64_t taken_at, std::optional<std::int64_t> reset_at) {
  AdjustOutcome out;
  out.now_us = now;
  if (adjustment == Adjustment::give_back && reset_at >= taken_at) {
    out.applied = true;
    return out;
  }
  std::vector<LimitAdjustment> adjusted;
  adjusted.reserve(limits.size());
  bool refused = false;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    // The state as a decision at now loads it (carried over to `change`, nothing taken).
    std::optional<LimitState> loaded = states[i];
    const LimitOutcome load = decide_limit(limits[i], change, loaded, now, 0, true);
    if (load.stale_version != 0) {  // refused before any write
      out.stale_version = load.stale_version;
      return out;
    }
    adjusted.push_back(adjust_limit(limits[i], std::move(loaded), now, adjustment, amount, taken_at,
                                    load.rewritten));
    if (!refused && !adjusted.back().refusal.empty()) {
      refused = true;
      out.refused_limit = i;
      out.refusal = adjusted.back().refusal;
    }
  }
  if (refused) return out;
  out.applied = true;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (!adjusted[i].writes) {
      out.ttl_us.emplace_back();
      continue;
    }
    states[i] = std::move(adjusted[i].state);
    out.ttl_us.emplace_back(adjusted[i].ttl_us);
  }
  return out;
}

}  // namespace redlimit::detail

#include "algorithms/reservations.hpp"

#include <algorithm>

#include "algorithms/leaky_bucket.hpp"

namespace redlimit::detail {
namespace {

/// The state of alternative State, created (empty) if absent or of another kind.
template <class State>
State& writable(std::optional<LimitState>& state) {
  if (!state || !std::holds_alternative<State>(*state)) state.emplace(State{});
  return std::get<State>(*state);
}

template <class State>
const State* stored(const std::optional<LimitState>& state) {
  return state ? std::get_if<State>(&*state) : nullptr;
}

std::int64_t remaining_after(FracTime latest, FracTime left, std::int64_t p, std::int64_t d) {
  const Int128 room = static_cast<Int128>(latest.us - left.us) * p + latest.frac - left.frac;
  return room > 0 ? static_cast<std::int64_t>(room / d) : 0;
}

ReserveOutcome reserve_gcra(const GcraParams& params, std::optional<LimitState>& state,
                            std::int64_t now, std::int64_t n, std::int64_t max_wait) {
  const std::int64_t p = params.p;
  const GcraState* current = stored<GcraState>(state);
  const FracTime tat = load_frac_time(current, now, p);
  const std::int64_t version = current != nullptr ? current->version : 0;
  const FracTime after = add(tat, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  FracTime slot{after.us - capacity.us, after.frac - capacity.frac};
  if (slot.frac < 0) slot = {slot.us - 1, slot.frac + p};
  if (slot.us < now) slot = {now, 0};
  const std::int64_t wait = FracTime{slot.us - now, slot.frac}.ceil_us();
  const FracTime latest{now + capacity.us, capacity.frac};

  ReserveOutcome out;
  out.version = version;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait) {
    out.decision.remaining = remaining_after(latest, tat, p, params.d);
    out.decision.retry_after_us = wait;
    out.decision.reset_after_us = subtract(tat, {now, 0}, p).ceil_us();
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = remaining_after(latest, after, p, params.d);
  out.decision.ttl_us = subtract(after, {now, 0}, p).ceil_us();
  out.decision.reset_after_us = out.decision.ttl_us;
  out.wait_us = wait;
  out.slot = slot;
  out.version = version + 1;
  writable<GcraState>(state) = GcraState{after, p, out.version};
  return out;
}

ReserveOutcome reserve_token_bucket(const TokenBucketParams& params,
                                    std::optional<LimitState>& state, std::int64_t now,
                                    std::int64_t n, std::int64_t max_wait) {
  const std::int64_t full = params.burst * params.d;
  const TokenBucketState* current = stored<TokenBucketState>(state);
  const auto [level, t] = load_tokens(params, current, now);
  const std::int64_t version = current != nullptr ? current->version : 0;
  const std::int64_t after = level - n * params.d;
  FracTime slot{t, 0};
  if (after < 0) slot = {t + (-after) / params.p, (-after) % params.p};
  const std::int64_t wait = FracTime{slot.us - now, slot.frac}.ceil_us();
  const std::int64_t lag = t - now;  // after a clock step back, times count from now

  ReserveOutcome out;
  out.version = version;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait || -after > max_debt(full)) {
    out.decision.remaining = level > 0 ? level / params.d : 0;
    out.decision.retry_after_us = wait;
    out.decision.reset_after_us = ceil_div(full - level, params.p) + lag;
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = after > 0 ? after / params.d : 0;
  out.decision.reset_after_us = ceil_div(full - after, params.p) + lag;
  out.decision.ttl_us = out.decision.reset_after_us;
  out.wait_us = wait;
  out.slot = slot;
  out.version = version + 1;
  writable<TokenBucketState>(state) = TokenBucketState{after, t, params.d, out.version};
  return out;
}

ReserveOutcome reserve_leaky_bucket(const LeakyBucketParams& params,
                                    std::optional<LimitState>& state, std::int64_t now,
                                    std::int64_t n, std::int64_t max_wait) {
  const std::int64_t p = params.p;
  const GcraState* current = stored<GcraState>(state);
  const FracTime free = load_frac_time(current, now, p);
  const std::int64_t version = current != nullptr ? current->version : 0;
  const FracTime after = add(free, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  const std::int64_t wait = FracTime{free.us - now, free.frac}.ceil_us();

  ReserveOutcome out;
  out.version = version;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait || FracTime{now + capacity.us, capacity.frac} < after) {
    if (free.us - now <= capacity.us) {
      const std::int64_t queued = ceil_div((free.us - now) * p + free.frac, params.d);
      out.decision.remaining = std::max<std::int64_t>(0, params.burst - queued);
    }
    out.decision.retry_after_us = wait;
    out.decision.reset_after_us = wait;
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = params.burst - ceil_div((after.us - now) * p + after.frac, params.d);
  out.decision.ttl_us = subtract(after, {now, 0}, p).ceil_us();
  out.decision.reset_after_us = out.decision.ttl_us;
  out.wait_us = wait;
  out.slot = free;
  out.version = version + 1;
  writable<GcraState>(state) = GcraState{after, p, out.version};
  return out;
}

CancelOutcome cancel_frac_time(const GcraParams& params, std::optional<LimitState>& state,
                               std::int64_t now, std::int64_t n) {
  const std::int64_t p = params.p;
  const GcraState* current = stored<GcraState>(state);
  const FracTime time = load_frac_time(current, now, p);
  CancelOutcome out;
  out.returned = true;
  out.shift = scaled(n, params.d, p);
  out.version = (current != nullptr ? current->version : 0) + 1;
  FracTime back{time.us - out.shift.us, time.frac - out.shift.frac};
  if (back.frac < 0) back = {back.us - 1, back.frac + p};
  if (!(FracTime{now, 0} < back)) back = {now, 0};
  out.ttl_us = std::max<std::int64_t>(1, FracTime{back.us - now, back.frac}.ceil_us());
  writable<GcraState>(state) = GcraState{back, p, out.version};
  return out;
}

CancelOutcome cancel_token_bucket(const TokenBucketParams& params, std::optional<LimitState>& state,
                                  std::int64_t now, std::int64_t n) {
  const std::int64_t full = params.burst * params.d;
  const TokenBucketState* current = stored<TokenBucketState>(state);
  const auto [level, t] = load_tokens(params, current, now);
  CancelOutcome out;
  out.returned = true;
  out.shift = scaled(n, params.d, params.p);
  out.version = (current != nullptr ? current->version : 0) + 1;
  const std::int64_t back = std::min(full, level + n * params.d);
  out.ttl_us = std::max<std::int64_t>(1, ceil_div(full - back, params.p) + t - now);
  writable<TokenBucketState>(state) = TokenBucketState{back, t, params.d, out.version};
  return out;
}

}  // namespace

bool can_reserve(Algorithm algorithm) noexcept {
  return algorithm == Algorithm::gcra || algorithm == Algorithm::token_bucket ||
         algorithm == Algorithm::leaky_bucket;
}

ReserveOutcome reserve(const LimitSpec& spec, std::optional<LimitState>& state, std::int64_t now,
                       std::int64_t n, std::int64_t max_wait_us) {
  switch (spec.algorithm) {
    case Algorithm::gcra:
      return reserve_gcra({spec.a, spec.b, spec.c}, state, now, n, max_wait_us);
    case Algorithm::token_bucket:
      return reserve_token_bucket({spec.a, spec.b, spec.c}, state, now, n, max_wait_us);
    case Algorithm::leaky_bucket:
      return reserve_leaky_bucket({spec.a, spec.b, spec.c}, state, now, n, max_wait_us);
    default:
      return {};
  }
}

FracTime slot_for(FracTime slot, std::int64_t den, std::int64_t p) noexcept {
  return den == p ? slot : FracTime{slot.us, 0};
}

CancelOutcome cancel_reservation(const LimitSpec& spec, std::optional<LimitState>& state,
                                 std::int64_t now, std::int64_t n, FracTime slot,
                                 std::int64_t den) {
  slot = slot_for(slot, den, spec.a);
  if (!(FracTime{now, 0} < slot)) return {};  // already due: its permits were used
  switch (spec.algorithm) {
    case Algorithm::gcra:
    case Algorithm::leaky_bucket:
      return cancel_frac_time({spec.a, spec.b, spec.c}, state, now, n);
    case Algorithm::token_bucket:
      return cancel_token_bucket({spec.a, spec.b, spec.c}, state, now, n);
    default:
      return {};
  }
}

}  // namespace redlimit::detail

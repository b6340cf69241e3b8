#include "algorithms/gcra.hpp"

#include <algorithm>

namespace redlimit::detail {
namespace {

/// A leaky bucket's next departure `stored` (in 1/den us; a step of old_d/den us per permit)
/// carried as is to `params` at `since`: the permits queued then, (stored - since) / T as an
/// exact fraction (none when it is not after since), stay queued and depart d/p us apart from
/// since, rounded up to the next 1/p us, and no later than 2^52 us (the latest time any value
/// holds). With the same rate it is `stored` itself; a queue beyond the new size is kept.
FracTime keep_queue(FracTime stored, std::int64_t den, std::int64_t old_d, const GcraParams& params,
                    std::int64_t since) {
  if (!(FracTime{since, 0} < stored)) return {since, 0};
  // The backlog in 1/den us, at most 2^52 x 2^40: queued = units / old_d permits.
  const Int128 units = static_cast<Int128>(stored.us - since) * den + stored.frac;
  const Int128 whole = units / old_d;
  const Int128 part = units % old_d;
  // since + queued x d/p reaches 2^52 us once the span, in 1/p us, reaches `limit`.
  const Int128 limit = static_cast<Int128>(max_exact - since) * params.p;
  if (whole > limit / params.d) return {max_exact, 0};
  const Int128 span = whole * params.d + (part * params.d + old_d - 1) / old_d;
  if (span >= limit) return {max_exact, 0};
  return {since + static_cast<std::int64_t>(span / params.p),
          static_cast<std::int64_t>(span % params.p)};
}

}  // namespace

LoadedTime load_frac_time(const GcraParams& params, const PolicyChange& change,
                          const GcraState* state, std::int64_t now, StoredTime kind) {
  const std::int64_t p = params.p;
  const std::optional<Stamp> stored_stamp = state != nullptr ? state->stamp : std::nullopt;
  const bool other_parameters = stored_stamp && (state->den != p || stored_stamp->b != params.d ||
                                                 stored_stamp->c != params.burst);
  const StampRule rule = stamp_rule(change, version_field(stored_stamp), other_parameters);
  LoadedTime out{.time = {now, 0}, .stamp_version = rule.version};
  if (state == nullptr) return out;
  FracTime stored = state->tat;
  // A clock step back: the backlog the write held, counted from now.
  const bool stepped = state->written_us && now < *state->written_us;
  if (stepped) stored.us -= *state->written_us - now;
  if (!state->stamp) {
    if (state->den != p) stored = {stored.ceil_us(), 0};
    out.rewritten = true;
  } else {
    const Stamp& stamp = *state->stamp;
    if (rule.stale_version != 0) {
      out.stale_version = rule.stale_version;
      return out;
    }
    out.rewritten = rule.restamp;
    // A new version of the same parameters keeps the state exactly, unless asked to reset.
    if (rule.restamp && (other_parameters || rule.carry == Carry::reset)) {
      const std::int64_t since = change_time(change, now);
      if (kind == StoredTime::next_departure && rule.carry == Carry::as_is) {
        stored = keep_queue(stored, state->den, stamp.b, params, since);
      } else {
        std::int64_t available = stamp.c;
        if (FracTime{since, 0} < stored) {
          const Int128 units = static_cast<Int128>(stored.us - since) * state->den + stored.frac;
          available =
              stamp.c -
              ceil_div(units <= max_exact ? static_cast<std::int64_t>(units) : max_exact, stamp.b);
        }
        const std::int64_t carried =
            std::max(carry_permits(available, stamp.c, params.burst, rule.carry),
                     params.burst - max_exact / params.d);
        const FracTime span = scaled(params.burst - carried, params.d, p);
        stored = {since + span.us, span.frac};
      }
    }
  }
  out.rewritten = out.rewritten || stepped;
  if (FracTime{now, 0} < stored) out.time = stored;
  // A value that records its write time keeps a time far ahead (a debt: penalize, block); in
  // one that does not, that is a clock step back: later than any time this policy stores at now.
  if (state->written_us) return out;
  const FracTime capacity = scaled(params.burst, params.d, p);
  FracTime reach{now + capacity.us, capacity.frac};
  if (kind == StoredTime::tat && state->book.version > 0)
    reach.us += longest_reservation_wait_us(now);
  if (reach < out.time) {
    out.time = reach;
    out.rewritten = true;
  }
  return out;
}

LimitOutcome decide_gcra(const GcraParams& params, const PolicyChange& change,
                         const GcraState* state, std::int64_t now, std::int64_t n,
                         GcraState* next) {
  const std::int64_t p = params.p;
  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = now;
  const LoadedTime loaded = load_frac_time(params, change, state, now, StoredTime::tat);
  if (loaded.stale_version != 0) {
    out.stale_version = loaded.stale_version;
    return out;
  }
  out.rewritten = loaded.rewritten;
  const FracTime tat = loaded.time;
  const FracTime after = add(tat, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  const FracTime latest{now + capacity.us, capacity.frac};  // now + tau

  out.allowed = after <= latest;
  out.idle_after_us = subtract(tat, {now, 0}, p).ceil_us();
  const FracTime left = out.allowed ? after : tat;
  // A TAT far ahead (a long queue, or another policy's state) leaves nothing.
  const Int128 room = static_cast<Int128>(latest.us - left.us) * p + latest.frac - left.frac;
  out.remaining = room > 0 ? static_cast<std::int64_t>(room / params.d) : 0;
  if (out.allowed) {
    out.reset_after_us = subtract(after, {now, 0}, p).ceil_us();
  } else {
    out.retry_after_us = subtract(after, latest, p).ceil_us();
    out.reset_after_us = out.idle_after_us;
  }
  if (out.allowed || out.rewritten || n == 0) {
    out.ttl_us = std::max<std::int64_t>(1, subtract(left, {now, 0}, p).ceil_us());
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : GcraState{};
      next->tat = left;  // the reservation bookkeeping stays
      next->den = p;
      next->stamp = stamp_of(params, loaded.stamp_version);
      next->written_us = now;
    }
  }
  return out;
}

}  // namespace redlimit::detail

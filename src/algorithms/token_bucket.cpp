#include "algorithms/token_bucket.hpp"

#include <algorithm>

#include "algorithms/exact.hpp"

namespace redlimit::detail {
namespace {

/// The level of a stamped state carried over to `params` at `since`: its whole permits then,
/// under the stamp, as carry_permits() says with `carry`; the level is set at since. A state
/// last written before since is refilled to since at the old rate. One last written after since
/// (by a process that had not heard of the change yet) is projected back to since: the refill
/// the old rate credited over (since, last] is taken off, a debt if it comes to that (at most the
/// most debt a level may carry). That is stricter than the state at since, never looser: what
/// the late write took stays taken.
void carry_over(const TokenBucketParams& params, std::int64_t since, Carry carry,
                const TokenBucketState& state, std::int64_t& level, std::int64_t& last) {
  const Stamp& stamp = *state.stamp;
  const std::int64_t old_full = stamp.c * state.den;
  level = std::min(level, old_full);
  if (last > since) {
    const std::int64_t most = max_debt(old_full);
    level = last - since > max_exact / stamp.a ? -most : level - (last - since) * stamp.a;
    level = std::max(level, -most);
  } else {
    const std::int64_t missing = old_full - level;
    if (missing > 0) {
      level =
          since - last >= ceil_div(missing, stamp.a) ? old_full : level + (since - last) * stamp.a;
    }
  }
  const std::int64_t available = floor_div_signed(level, state.den);
  const std::int64_t full = params.burst * params.d;
  const std::int64_t most = (max_exact - full) / params.d;  // the most debt, in tokens
  level = std::max(carry_permits(available, stamp.c, params.burst, carry), -most) * params.d;
  last = since;
}

}  // namespace

Tokens load_tokens(const TokenBucketParams& params, const PolicyChange& change,
                   const TokenBucketState* state, std::int64_t now) {
  const std::int64_t full = params.burst * params.d;
  const std::optional<Stamp> stored = state != nullptr ? state->stamp : std::nullopt;
  const bool other_parameters =
      stored && (state->den != params.d || stored->a != params.p || stored->c != params.burst);
  const StampRule rule = stamp_rule(change, version_field(stored), other_parameters);
  Tokens out;
  out.stamp_version = rule.version;
  std::int64_t level = full;
  std::int64_t last = now;
  if (state != nullptr) {
    level = state->level;
    last = state->last_us;
    if (stored) {
      if (rule.stale_version != 0) {
        out.stale_version = rule.stale_version;
        return out;
      }
      out.rewritten = rule.restamp;
      // A new version of the same parameters keeps the level exactly, unless asked to reset.
      if (rule.restamp && (other_parameters || rule.carry == Carry::reset)) {
        carry_over(params, change_time(change, now), rule.carry, *state, level, last);
      }
    } else {
      out.rewritten = true;
      // A level counted in another unit keeps its whole tokens (or its whole debt, rounded up).
      if (state->den != params.d) {
        if (level >= 0) {
          const std::int64_t tokens = level / state->den;
          level = static_cast<Int128>(tokens) * params.d >= full ? full : tokens * params.d;
        } else {
          const std::int64_t debt = ceil_div(-level, state->den);
          level = debt > max_debt(full) / params.d ? -max_debt(full) : -debt * params.d;
        }
      }
    }
    level = std::min(level, full);
    if (last > now) {  // a clock step back
      last = now;
      out.rewritten = true;
    }
  }
  const std::int64_t missing = full - level;
  if (missing > 0) {
    const std::int64_t elapsed = now - last;
    level = elapsed >= ceil_div(missing, params.p) ? full : level + elapsed * params.p;
  }
  out.level = level;
  return out;
}

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const PolicyChange& change,
                                 const TokenBucketState* state, std::int64_t now, std::int64_t n,
                                 TokenBucketState* next) {
  const std::int64_t full = params.burst * params.d;
  const Tokens tokens = load_tokens(params, change, state, now);
  LimitOutcome out;
  out.limit = params.burst;
  out.now_us = now;
  if (tokens.stale_version != 0) {
    out.stale_version = tokens.stale_version;
    return out;
  }
  out.rewritten = tokens.rewritten;
  const std::int64_t level = tokens.level;
  const std::int64_t cost = n * params.d;
  out.allowed = level >= cost;
  out.idle_after_us = ceil_div(full - level, params.p);
  const std::int64_t left = out.allowed ? level - cost : level;
  if (out.allowed) {
    out.remaining = floor_div(left, params.d);
    out.reset_after_us = ceil_div(full - left, params.p);
  } else {
    out.remaining = level > 0 ? floor_div(level, params.d) : 0;
    out.retry_after_us = ceil_div(cost - level, params.p);
    out.reset_after_us = out.idle_after_us;
  }
  if (out.allowed || out.rewritten || n == 0) {
    out.ttl_us = std::max<std::int64_t>(1, ceil_div(full - left, params.p));
    if (next != nullptr) {
      if (next != state) *next = state != nullptr ? *state : TokenBucketState{};
      next->level = left;  // the reservation bookkeeping stays
      next->last_us = now;
      next->den = params.d;
      next->stamp = stamp_of(params, tokens.stamp_version);
    }
  }
  return out;
}

}  // namespace redlimit::detail

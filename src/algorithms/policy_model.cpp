#include "algorithms/policy_model.hpp"

#include <algorithm>
#include <array>

#include "algorithms/leaky_bucket.hpp"

namespace redlimit::detail {
namespace {

/// decide_limit() for the algorithm whose state is `State`.
template <class State, class Params, class Decide>
LimitOutcome evaluate(Decide decide, const Params& params, const PolicyChange& change,
                      std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                      bool commit) {
  State* current = state ? std::get_if<State>(&*state) : nullptr;
  State* next = nullptr;
  if (commit) next = current != nullptr ? current : &std::get<State>(state.emplace(State{}));
  return decide(params, change, current, now, n, next);
}

}  // namespace

LimitOutcome decide_limit(const LimitSpec& spec, const PolicyChange& change,
                          std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                          bool commit) {
  switch (spec.algorithm) {
    case Algorithm::gcra:
      return evaluate<GcraState>(decide_gcra, GcraParams{spec.a, spec.b, spec.c}, change, state,
                                 now, n, commit);
    case Algorithm::leaky_bucket:
      return evaluate<GcraState>(decide_leaky_bucket, LeakyBucketParams{spec.a, spec.b, spec.c},
                                 change, state, now, n, commit);
    case Algorithm::token_bucket:
      return evaluate<TokenBucketState>(decide_token_bucket,
                                        TokenBucketParams{spec.a, spec.b, spec.c}, change, state,
                                        now, n, commit);
    case Algorithm::fixed_window:
      return evaluate<FixedWindowState>(decide_fixed_window,
                                        FixedWindowParams{spec.a, spec.b, spec.c != 0}, change,
                                        state, now, n, commit);
    case Algorithm::sliding_window_log:
      return evaluate<SlidingWindowLogState>(decide_sliding_window_log,
                                             SlidingWindowLogParams{spec.a, spec.b}, change, state,
                                             now, n, commit);
    case Algorithm::sliding_window_counter:
      return evaluate<SlidingWindowCounterState>(decide_sliding_window_counter,
                                                 SlidingWindowCounterParams{spec.a, spec.b}, change,
                                                 state, now, n, commit);
  }
  return {};
}

PolicyOutcome decide_policy(std::span<const LimitSpec> limits,
                            std::span<std::optional<LimitState>> states, std::int64_t now,
                            std::int64_t n, Mode mode, PolicyChange change) {
  const std::array<ClaimModel, 1> claim{ClaimModel{limits, states, n, change}};
  return decide_claims(claim, now, mode);
}

PolicyOutcome decide_claims(std::span<const ClaimModel> claims, std::int64_t now, Mode mode) {
  std::size_t limit_count = 0;
  for (const ClaimModel& claim : claims)
    limit_count += claim.limits.size();
  PolicyOutcome out;
  out.allowed = true;
  out.limits.reserve(limit_count);
  for (std::size_t c = 0; c < claims.size(); ++c) {
    const ClaimModel& claim = claims[c];
    for (std::size_t i = 0; i < claim.limits.size(); ++i) {
      out.limits.push_back(
          decide_limit(claim.limits[i], claim.change, claim.states[i], now, claim.n, false));
      if (out.limits.back().stale_version != 0) {  // refused before any write
        out.allowed = false;
        out.stale_version = out.limits.back().stale_version;
        out.stale_claim = c;
        return out;
      }
      out.allowed = out.allowed && out.limits.back().allowed;
      out.now_us = std::max(out.now_us, out.limits.back().now_us);
    }
  }
  std::size_t at = 0;
  for (const ClaimModel& claim : claims) {
    for (std::size_t i = 0; i < claim.limits.size(); ++i, ++at) {
      LimitOutcome& limit = out.limits[at];
      if (mode == Mode::peek) {  // every field as the state now: nothing was taken
        if (limit.allowed) limit.remaining += claim.n;
        limit.reset_after_us = limit.idle_after_us;
      } else if (out.allowed) {
        decide_limit(claim.limits[i], claim.change, claim.states[i], now, claim.n, true);
      } else if (limit.rewritten) {  // carried over to this policy, with nothing taken
        const std::int64_t carried_ttl_us =
            decide_limit(claim.limits[i], claim.change, claim.states[i], now, 0, true).ttl_us;
        // Why a window keeps the TTL of its own decision on the permits: its script writes
        // that decision's reset (the window's end, or when its newest permit leaves), where a
        // bucket's writes how long the state carried over matters.
        const Algorithm algorithm = claim.limits[i].algorithm;
        if (algorithm == Algorithm::gcra || algorithm == Algorithm::token_bucket ||
            algorithm == Algorithm::leaky_bucket) {
          limit.ttl_us = carried_ttl_us;
        }
      }
    }
  }
  for (std::size_t i = 1; i < out.limits.size(); ++i) {
    const LimitOutcome& candidate = out.limits[i];
    const LimitOutcome& best = out.limits[out.binding];
    if (out.allowed ? candidate.remaining < best.remaining
                    : !candidate.allowed &&
                          (best.allowed || candidate.retry_after_us > best.retry_after_us)) {
      out.binding = i;
    }
  }
  return out;
}

}  // namespace redlimit::detail

#include "algorithms/policy_model.hpp"

#include <algorithm>

#include "algorithms/leaky_bucket.hpp"

namespace redlimit::detail {
namespace {

/// Decides one limit with its algorithm; with `commit`, writes the new state in place (a state
/// that is absent or of another algorithm is replaced).
template <class State, class Params, class Decide>
LimitOutcome evaluate(Decide decide, const Params& params, std::optional<LimitState>& state,
                      std::int64_t now, std::int64_t n, bool commit) {
  State* current = state ? std::get_if<State>(&*state) : nullptr;
  State* next = nullptr;
  if (commit) next = current != nullptr ? current : &std::get<State>(state.emplace(State{}));
  return decide(params, current, now, n, next);
}

template <class State, class Params, class Decide>
LimitOutcome evaluate(Decide decide, const Params& params, const PolicyChange& change,
                      std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                      bool commit) {
  State* current = state ? std::get_if<State>(&*state) : nullptr;
  State* next = nullptr;
  if (commit) next = current != nullptr ? current : &std::get<State>(state.emplace(State{}));
  return decide(params, change, current, now, n, next);
}

LimitOutcome decide_limit(const LimitSpec& spec, std::optional<LimitState>& state, std::int64_t now,
                          std::int64_t n, bool commit) {
  switch (spec.algorithm) {
    case Algorithm::gcra:
      return evaluate<GcraState>(decide_gcra, GcraParams{spec.a, spec.b, spec.c}, state, now, n,
                                 commit);
    case Algorithm::leaky_bucket:
      return evaluate<GcraState>(decide_leaky_bucket, LeakyBucketParams{spec.a, spec.b, spec.c},
                                 state, now, n, commit);
    case Algorithm::token_bucket:
      return evaluate<TokenBucketState>(
          decide_token_bucket, TokenBucketParams{spec.a, spec.b, spec.c}, state, now, n, commit);
    case Algorithm::fixed_window:
      return evaluate<FixedWindowState>(decide_fixed_window,
                                        FixedWindowParams{spec.a, spec.b, spec.c != 0},
                                        PolicyChange{}, state, now, n, commit);
    case Algorithm::sliding_window_log:
      return evaluate<SlidingWindowLogState>(decide_sliding_window_log,
                                             SlidingWindowLogParams{spec.a, spec.b}, PolicyChange{},
                                             state, now, n, commit);
    case Algorithm::sliding_window_counter:
      return evaluate<SlidingWindowCounterState>(decide_sliding_window_counter,
                                                 SlidingWindowCounterParams{spec.a, spec.b},
                                                 PolicyChange{}, state, now, n, commit);
  }
  return {};
}

}  // namespace

PolicyOutcome decide_policy(std::span<const LimitSpec> limits,
                            std::span<std::optional<LimitState>> states, std::int64_t now,
                            std::int64_t n, Mode mode) {
  PolicyOutcome out;
  out.allowed = true;
  out.limits.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    out.limits.push_back(decide_limit(limits[i], states[i], now, n, false));
    out.allowed = out.allowed && out.limits.back().allowed;
    out.now_us = std::max(out.now_us, out.limits.back().now_us);
  }
  if (out.allowed && mode == Mode::acquire) {
    for (std::size_t i = 0; i < limits.size(); ++i)
      decide_limit(limits[i], states[i], now, n, true);
  }
  if (mode == Mode::peek) {  // every field as the state now: nothing was taken
    for (LimitOutcome& limit : out.limits) {
      if (limit.allowed) limit.remaining += n;
      limit.reset_after_us = limit.idle_after_us;
    }
  }
  for (std::size_t i = 1; i < limits.size(); ++i) {
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

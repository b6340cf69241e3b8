#pragma once
// The C++ model of the decide scripts (lua/shapes/general.lua): every limit of a policy decides
// one request, all or nothing.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "algorithms/fixed_window.hpp"
#include "algorithms/gcra.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/sliding_window_counter.hpp"
#include "algorithms/sliding_window_log.hpp"
#include "algorithms/stamp.hpp"
#include "algorithms/token_bucket.hpp"
#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// One limit as the script receives it: the algorithm and its three integer parameters
/// (gcra, token_bucket, leaky_bucket: p, d, burst; fixed_window: limit, period, anchored;
/// sliding windows: limit, period, 0).
struct LimitSpec {
  Algorithm algorithm = Algorithm::gcra;
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t c = 0;
  friend bool operator==(const LimitSpec&, const LimitSpec&) = default;
};

/// The state of one limit for one key. leaky_bucket uses GcraState (the next departure time).
using LimitState = std::variant<GcraState, TokenBucketState, FixedWindowState,
                                SlidingWindowLogState, SlidingWindowCounterState>;

struct PolicyOutcome {
  bool allowed = false;
  /// A limit's state was written under a newer policy version than the request's: the request
  /// was refused and nothing was written (a script's stale reply).
  std::int64_t stale_version = 0;
  std::int64_t now_us = 0;      ///< the latest time any limit used
  std::size_t binding = 0;      ///< denied: longest retry_after; allowed: fewest remaining
  std::size_t stale_claim = 0;  ///< decide_claims(): the claim whose limit was stale
  std::vector<LimitOutcome> limits;
  const LimitOutcome& binding_outcome() const { return limits[binding]; }
};

/// Decides `n` permits of one limit with its algorithm; with `commit`, writes the new state in
/// place (a state that is absent or of another algorithm is replaced): the taken permits when
/// allowed, the state carried over to `change` when rewritten, the state as loaded when n = 0.
LimitOutcome decide_limit(const LimitSpec& spec, const PolicyChange& change,
                          std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                          bool commit);

/// Acquire writes the new states when every limit allows; peek never writes and reports, as
/// `remaining`, the permits available now (rather than after taking n).
enum class Mode { acquire, peek };

/// Decides `n` permits at `now` against every limit, under the policy in force `change`.
/// `states[i]` belongs to `limits[i]`; a state of the wrong alternative counts as absent, and an
/// absent one is created on a write. A denied acquire writes only the limits whose state was
/// carried over to `change` (LimitOutcome::rewritten, with its ttl_us), holding nothing more.
PolicyOutcome decide_policy(std::span<const LimitSpec> limits,
                            std::span<std::optional<LimitState>> states, std::int64_t now,
                            std::int64_t n, Mode mode, PolicyChange change = {});

/// One claim of a decision over several keys: a policy's limits, their states for the claim's
/// key, the permits asked for, and the policy in force.
struct ClaimModel {
  std::span<const LimitSpec> limits;
  std::span<std::optional<LimitState>> states;
  std::int64_t n = 1;
  PolicyChange change{};
};

/// Decides every claim at `now`, all or nothing, as the decide script's multi-claim form does
/// (lua/shapes/general.lua): the limits of all claims in order are the outcome's `limits`, and
/// `binding` indexes them; an acquire writes every claim's new state when every limit of every
/// claim allows, else only the states carried over, holding nothing more. The claims' states
/// must be distinct.
PolicyOutcome decide_claims(std::span<const ClaimModel> claims, std::int64_t now, Mode mode);

}  // namespace redlimit::detail

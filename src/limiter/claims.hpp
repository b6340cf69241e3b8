#pragma once
// Decisions over several (limiter, key) claims: try_acquire_all(), peek_all(), acquire_all().

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "limiter/backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/limiter.hpp"

namespace redlimit::detail {

class PolicyEnforcer;

/// What try_acquire_all() reaches of a Limiter.
struct LimiterAccess {
  static const std::shared_ptr<PolicyEnforcer>& enforcer(const Limiter& limiter) noexcept {
    return limiter.enforcer_;
  }
};

/// A claim with its limiter's enforcer, which the call keeps alive.
struct HeldClaim {
  std::shared_ptr<PolicyEnforcer> enforcer;
  std::string key;
  std::int64_t permits = 1;
};

/// Each claim's backend, in the claims' order (Backend::decide_claims()).
std::vector<Backend*> backends_of(const std::vector<HeldClaim>& held);

/// When a call over the claims that begins now stops asking again after StalePolicy: the
/// earliest of their limiters' (StaleRetry).
std::chrono::steady_clock::time_point stale_deadline(const std::vector<HeldClaim>& held);

/// The claims' requests under the policies in force, and whether the backend may be asked.
struct RequestsInForce {
  std::vector<DecideRequest> requests;
  /// Set when a follower's claim could not confirm its stored policy (UnconfirmedPolicy): its
  /// request is under the policy read last, and the call is the failure policies' to answer.
  std::exception_ptr unconfirmed;
};
/// The claims' requests under the policies in force (a follower's claim: its stored policy, of
/// at least the version `retry` asks for it, read by its deadline).
Task<RequestsInForce> requests_in_force(const std::vector<HeldClaim>& held, Operation operation,
                                        const StaleRetry& retry);

/// Each claim's failure policy's answer when Redis could not answer (`error`), as one decision
/// (binding_decision()); rethrows an error that is not unavailability.
Decision decide_on_failure(const std::vector<HeldClaim>& held,
                           std::span<const DecideRequest> requests,
                           const std::exception_ptr& error);

/// acquire_all() by reserving (src/limiter/claims_reserving.cpp): every claim's key at one slot
/// (Backend::reserve_claims()), so that each key's queue keeps its order. None, before any I/O
/// but reading a follower's policies, when the claims cannot be reserved on: a policy that is
/// not a single gcra, token_bucket or leaky_bucket limit (the caller asks again at each
/// retry_after). `started` is when the call began. An admission in Redis names the time each
/// claim's key was charged: when its slot's script ran, or its slot after a wait.
Task<std::optional<ClaimsDecision>> acquire_all_by_reserving(
    const std::vector<HeldClaim>& held, const OwnedAcquireOptions& options,
    std::chrono::steady_clock::time_point started);

}  // namespace redlimit::detail

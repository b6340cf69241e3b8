#pragma once
// Decisions over several (limiter, key) claims: try_acquire_all().

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "limiter/backend.hpp"
#include "redis/command_dispatcher.hpp"
#include "redlimit/limiter.hpp"

namespace redlimit::detail {

class PolicyEnforcer;

/// What try_acquire_all() reaches of a Limiter.
struct LimiterAccess {
  static const std::shared_ptr<PolicyEnforcer>& enforcer(const Limiter& limiter) noexcept {
    return limiter.enforcer_;
  }
};

/// Decides every request at once, all or nothing, with one EVALSHA of the decide script's
/// several-claim form (acquire_all, or peek_all for Operation::peek): Decision::claim and
/// binding name the binding request and its limit, and policy_version is that request's.
/// StalePolicy (with its claim) when a key holds state of a newer policy version than its
/// request's. The requests' keys must be distinct, and in one slot on a cluster.
Task<Decision> decide_claims_in_redis(CommandDispatcher& client,
                                      std::span<const DecideRequest> requests, Operation operation);

/// The binding one of `decisions` (one per claim), as the decide script picks it: when all are
/// allowed, the fewest remaining; else, of the denied, the longest retry_after (the first on a
/// tie). The result's `claim` names it, and `allowed` is whether every decision was.
Decision binding_decision(std::span<const Decision> decisions);

}  // namespace redlimit::detail

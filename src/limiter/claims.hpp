#pragma once
// Decisions over several (limiter, key) claims: try_acquire_all(), peek_all(), acquire_all().

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "limiter/backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "redlimit/limiter.hpp"

namespace redlimit::detail {

class PolicyEnforcer;

/// A claim with its limiter's enforcer, which the call keeps alive.
struct HeldClaim {
  std::shared_ptr<PolicyEnforcer> enforcer;
  std::string key;
  std::int64_t permits = 1;
};

/// Whether acquire_all() can reserve on `requests`: each policy a single gcra, token_bucket or
/// leaky_bucket limit (else it asks again at each retry_after).
bool reservable(std::span<const DecideRequest> requests);

/// Counts an admission of every claim that came too late to use (AcquireOptions::max_lateness)
/// and throws the Unavailable their failure policies answer.
[[noreturn]] void refuse_late(const std::vector<HeldClaim>& held);

/// acquire_all() by reserving `requests` (src/limiter/claims_reserving.cpp): every claim's key
/// at one slot (reserve_claims() of `backends`, each claim's), so that each key's queue keeps
/// its order, then the
/// wait for it. None when the parts were given back or moved meanwhile: the caller reserves
/// again. `started` is when the call began. An admission in Redis names the time each claim's
/// key was charged: when its slot's script ran, or its slot after a wait. One answered too
/// late to use (options.max_lateness) is given back while its slot is ahead, and refused
/// (refuse_late()).
Task<std::optional<ClaimsDecision>> reserve_and_wait(const std::vector<HeldClaim>& held,
                                                     std::span<Backend* const> backends,
                                                     const std::vector<DecideRequest>& requests,
                                                     const OwnedAcquireOptions& options,
                                                     std::chrono::steady_clock::time_point started);

}  // namespace redlimit::detail

#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "limiter/backend.hpp"
#include "limiter/owned_acquire_options.hpp"

namespace redlimit::detail {

class PolicyEnforcer;

/// A claim with its limiter's enforcer, which the call keeps alive.
struct HeldClaim {
  std::shared_ptr<PolicyEnforcer> enforcer;
  std::string key;
  std::int64_t permits = 1;
};

/// Counts an admission of every claim that came too late to use (AcquireOptions::max_lateness)
/// and throws the Unavailable their failure policies answer.
[[noreturn]] void refuse_late(std::span<const HeldClaim> held);

/// The reservation waiter (docs/waiting.md) of acquire() (one claim) and acquire_all() (several),
/// begun at `started` (options.max_wait counts from it): reserves `requests` (one per claim of
/// `held`, each a single reservable limit) at one slot on every claim's key or none, sleeps until
/// it (moved earlier by its keys' cancellation notices, the owner leases renewed beside), then
/// asks each part where it stands. Gives every part back on a stop (then throws Cancelled, unless
/// the slot had come), on its task's destruction, or when an answer comes too late
/// (options.max_lateness: counted, then thrown as Unavailable). One claim Redis cannot answer is
/// reserved on its limiter's local fallback, if that can grant it. The decision (its `waited` is
/// the caller's; with no wait in Redis, each claim's Redis time), or none when the caller reserves
/// again (a policy replaced, a part given back or moved). Throws what kept Redis from answering.
Task<std::optional<ClaimsDecision>> reserve_and_wait(std::span<const HeldClaim> held,
                                                     std::span<const DecideRequest> requests,
                                                     const OwnedAcquireOptions& options,
                                                     std::chrono::steady_clock::time_point started);

}  // namespace redlimit::detail

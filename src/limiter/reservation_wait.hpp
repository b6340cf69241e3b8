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

/// The reservation waiter (docs/waiting.md) of acquire() (one claim) and acquire_all() (several):
/// reserves `requests` (one per claim of `held`, each a single limit that can be reserved on) at
/// one slot, every claim's key or none, then sleeps until the slot: its parts moved earlier by
/// the cancellation notices of their keys, their owner leases renewed beside the sleep, each
/// part asked at the wake where it stands. Gives every part back on a stop (then throws
/// Cancelled, unless the slot had come), on the destruction of its task, or when an answer comes
/// too late (options.max_lateness, at the answer and at the wake: counted, then thrown as
/// Unavailable). One claim whose reservation Redis cannot answer is reserved on its limiter's
/// local fallback, if it has one that can grant it. The decision, whose `waited` the caller sets;
/// for an admission in Redis with no wait, each claim's Redis time. None when the caller
/// reserves again: a part's policy was replaced, or a part was given back or moved elsewhere
/// than its waiter has it. An error that kept Redis from answering is thrown, for the caller's
/// failure policies. `started` is when the call began (options.max_wait counts from it).
Task<std::optional<ClaimsDecision>> reserve_and_wait(std::span<const HeldClaim> held,
                                                     std::span<const DecideRequest> requests,
                                                     const OwnedAcquireOptions& options,
                                                     std::chrono::steady_clock::time_point started);

}  // namespace redlimit::detail

#pragma once
// Decisions over several (limiter, key) claims: try_acquire_all().

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "limiter/backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "policy/stale_policy.hpp"
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

/// A claim with its limiter's enforcer, which the call keeps alive.
struct HeldClaim {
  std::shared_ptr<PolicyEnforcer> enforcer;
  std::string key;
  std::int64_t permits = 1;
};

/// A decision over several claims, and the Redis time each claim's key used.
struct ClaimsDecision {
  Decision decision;
  /// Per claim (in the requests' order), the Redis time its own key was decided at: across
  /// cluster slots, each slot's script call has its own. Empty: decision.server_time_us for
  /// every claim (one script call; after a wait, the slot every part was used at; in process;
  /// a denial; or the failure policies' answer).
  std::vector<std::int64_t> server_times_us{};
};

/// The claims' requests under the policies in force, and whether Redis may be asked.
struct RequestsInForce {
  std::vector<DecideRequest> requests;
  /// Set when a follower's claim could not confirm its stored policy (UnconfirmedPolicy): its
  /// request is under the policy read last, and the call is the failure policies' to answer.
  std::exception_ptr unconfirmed;
};
/// The claims' requests under the policies in force (a follower's claim: its stored policy, of
/// at least the version `retry` asks for it, read by its deadline), checked by check_keys() in
/// Redis.
Task<RequestsInForce> requests_in_force(const std::vector<HeldClaim>& held, Operation operation,
                                        const StaleRetry& retry);

/// Each claim's failure policy's answer when Redis could not answer (`error`), as one decision
/// (binding_decision()); rethrows an error that is not unavailability.
Decision decide_on_failure(const std::vector<HeldClaim>& held,
                           std::span<const DecideRequest> requests,
                           const std::exception_ptr& error);

/// Throws InvalidArgument when two requests name one key (the second would overwrite the
/// first's permits).
void check_keys(std::span<const DecideRequest> requests);

/// The requests' indexes by hash slot, each slot where its first request is; one group on a
/// single server.
std::vector<std::vector<std::size_t>> slot_groups(std::span<const DecideRequest> requests,
                                                  bool cluster);

/// The requests of one slot group's claims (`group`: indexes into `requests`).
std::vector<DecideRequest> requests_of(const std::vector<DecideRequest>& requests,
                                       const std::vector<std::size_t>& group);

/// acquire_all() by reserving, in Redis or in process (src/limiter/claims_reserving.cpp): every
/// claim's key at one slot, so that each key's queue keeps its order. None, before any I/O but
/// reading a follower's policies, when the claims cannot be reserved on: a policy that is not a
/// single gcra, token_bucket or leaky_bucket limit (the caller asks again at each
/// retry_after). `started` is when the call began. An admission in Redis names the time each
/// claim's key was charged: when its slot's script ran, or its slot after a wait.
Task<std::optional<ClaimsDecision>> acquire_all_by_reserving(
    const std::vector<HeldClaim>& held, const OwnedAcquireOptions& options,
    std::chrono::steady_clock::time_point started);

/// Decides every request at once, all or nothing, with one EVALSHA of the decide script's
/// several-claim form (acquire_all, or peek_all for Operation::peek): Decision::claim and
/// binding name the binding request and its limit, and policy_version is that request's.
/// StalePolicy (with its claim) when a key holds state of a newer policy version than its
/// request's. The requests' keys must be distinct, and in one slot on a cluster.
Task<Decision> decide_claims_in_redis(CommandDispatcher& client,
                                      std::span<const DecideRequest> requests, Operation operation);

/// One claim's part of a reservation over several claims (acquire_all()).
struct ClaimReservation {
  CancelTicket ticket;               ///< on the claim's key: the common slot, and its place
  std::int64_t lease_expiry_us = 0;  ///< its owner lease's expiry (server time); 0: not registered
};

/// Several claims reserved at one slot, on every claim's key or none (lua/reserve.lua,
/// reserve_all).
struct ClaimsReservation {
  /// allowed: reserved; else nothing was (retry_after: the binding claim's wait). Its `claim`
  /// names the binding claim; server_time_us is when it was decided (in Redis; 0 in process).
  Decision decision;
  std::int64_t wait_us = 0;  ///< how long after the decision the permits may be used
  /// That time: in Redis, server microseconds; in process, the limiters' clock. Across cluster
  /// slots with no wait, the binding claim's (each claim's own is its ticket's slot).
  std::int64_t slot_us = 0;
  /// Per request, when allowed; each ticket's slot is where its key took the permits.
  std::vector<ClaimReservation> claims;
};

/// Reserves every request's permits at one slot, the latest of their keys' earliest and
/// `earliest_slot_us` (server time; 0: none), if that is within `max_wait_us`: one EVALSHA of
/// the reserve script's reserve_all, atomic. Each request's policy is a single limit that can
/// be reserved on; the keys are distinct, and in one slot on a cluster. A reservation waiting
/// longer than `lease_us` (when not 0) is registered under its owner's lease on every key.
/// StalePolicy (with its claim) as decide_claims_in_redis(). `earliest_only` (earliest_all):
/// the slot, or the denial, as it would be decided, with nothing written and no claims.
Task<ClaimsReservation> reserve_claims_in_redis(CommandDispatcher& client,
                                                std::span<const DecideRequest> requests,
                                                std::int64_t max_wait_us, std::int64_t lease_us,
                                                std::int64_t earliest_slot_us = 0,
                                                bool earliest_only = false);

/// Reserves claims in several hash slots of a cluster (`groups`, slot_groups()) at one slot:
/// each hash slot's claims are first asked for their earliest slot, writing nothing
/// (earliest_all; a denial there takes nothing), then reserved with reserve_claims_in_redis()
/// at the latest of them, one hash slot after another; claims reserved earlier than a later
/// hash slot's (traffic in between) are given back and reserved again at its slot, until every
/// hash slot agrees. Until then, and on a denial or an error until given back, permits are
/// held unused (under-admission, never over). `max_wait_us()` is what is left of the call's
/// max_wait at each call. The result is in the requests' order: wait_us until the last hash
/// slot's wake, the binding claim the one whose key set the slot (with no wait, the fewest
/// remaining). A denial, or an error (StalePolicy with its claim in the requests' order), comes
/// after every part is given back; so does the task's destruction (in the background).
Task<ClaimsReservation> reserve_claims_across_slots(
    const std::vector<HeldClaim>& held, const std::vector<DecideRequest>& requests,
    const std::vector<std::vector<std::size_t>>& groups, std::function<std::int64_t()> max_wait_us,
    std::int64_t lease_us);

/// The binding one of `decisions` (one per claim), as the decide script picks it: when all are
/// allowed, the fewest remaining; else, of the denied, the longest retry_after (the first on a
/// tie). The result's `claim` names it, and `allowed` is whether every decision was.
Decision binding_decision(std::span<const Decision> decisions);

}  // namespace redlimit::detail

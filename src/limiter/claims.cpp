// try_acquire_all(): one decision over several (limiter, key) claims, all or nothing.

#include "limiter/claims.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>

#include "limiter/local_backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/unavailability.hpp"
#include "policy/stale_policy.hpp"
#include "policy/unconfirmed_policy.hpp"
#include "policy/validation.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string claim_name(std::size_t index) {
  return "Claim " + std::to_string(index);
}

/// The claims, checked as far as they can be without I/O; throws InvalidArgument.
std::vector<HeldClaim> checked(std::vector<Claim>& claims) {
  if (claims.empty()) throw InvalidArgument("try_acquire_all needs at least one Claim");
  std::vector<HeldClaim> held;
  held.reserve(claims.size());
  for (std::size_t i = 0; i < claims.size(); ++i) {
    Claim& claim = claims[i];
    if (claim.limiter == nullptr) throw InvalidArgument(claim_name(i) + ": the limiter is null");
    const std::shared_ptr<PolicyEnforcer>& enforcer = LimiterAccess::enforcer(*claim.limiter);
    if (!enforcer) throw InvalidArgument(claim_name(i) + ": the limiter was moved from");
    const std::string& name = enforcer->options().name;
    if (enforcer->options().shadow) {
      throw InvalidArgument(claim_name(i) + ": limiter '" + name +
                            "' is in shadow mode, which try_acquire_all does not take (its "
                            "denial would deny the other claims)");
    }
    const bool in_redis = enforcer->redis_backend() != nullptr;
    if (i > 0) {
      const PolicyEnforcer& first = *held.front().enforcer;
      const bool same = in_redis ? first.redis_backend() != nullptr &&
                                       &first.redis_backend()->dispatcher() ==
                                           &enforcer->redis_backend()->dispatcher()
                                 : first.local_backend() != nullptr;
      if (!same) {
        throw InvalidArgument(claim_name(i) + ": limiter '" + name +
                              "' does not use the Client of claim 0's limiter: the limiters "
                              "of one decision use one Client, or are all in process");
      }
    }
    check_key(claim.key);
    if (claim.permits < 1) {
      throw InvalidArgument(claim_name(i) + ": permits must be at least 1, got " +
                            std::to_string(claim.permits));
    }
    if (!in_redis) {
      // In process each limiter keeps its own state: a key is claimed twice only on one limiter
      // (in Redis, requests_in_force() compares the keys themselves).
      for (std::size_t j = 0; j < held.size(); ++j) {
        if (held[j].enforcer == enforcer && held[j].key == claim.key) {
          throw InvalidArgument(claim_name(j) + " and " + claim_name(i) + " name the same key '" +
                                claim.key +
                                "' of one limiter: claim it once, with the permits of both");
        }
      }
    }
    held.push_back({enforcer, std::move(claim.key), claim.permits});
  }
  held.front().enforcer->check_thread();
  return held;
}

/// Gives back what the take of `request` at `taken_at_us` (Redis time) still holds. Why errors
/// are dropped: a take that cannot be given back stays taken (under-admission, never over).
Task<void> give_back(const HeldClaim& claim, const DecideRequest& request,
                     std::int64_t taken_at_us) {
  try {
    co_await claim.enforcer->redis_backend()->adjust(request, Adjustment::give_back,
                                                     request.permits, taken_at_us);
  } catch (...) {
  }
}

/// Claims in several hash slots of a cluster: each slot's claims are one script call, atomic
/// there, slot after slot. When a slot's claims are denied, or its call fails, every slot that
/// took gives back what its take still holds (Adjustment::give_back: never more than exact),
/// and the decision is that denial (or the error). Until then its permits are held, unused: for
/// the later slots' round trips and the give-backs', one per claim that took (under-admission,
/// never over). A peek asks every slot and takes nothing.
Task<ClaimsDecision> decide_across_slots(const std::vector<HeldClaim>& claims,
                                         const std::vector<DecideRequest>& requests,
                                         const std::vector<std::vector<std::size_t>>& groups,
                                         Operation operation) {
  CommandDispatcher& client = claims.front().enforcer->redis_backend()->dispatcher();
  std::vector<Decision> decided;  // per group, its claim index mapped to the requests'
  std::optional<Decision> denial;
  std::exception_ptr error;
  for (const std::vector<std::size_t>& group : groups) {
    const std::vector<DecideRequest> group_requests = requests_of(requests, group);
    try {
      Decision decision = co_await decide_claims_in_redis(client, group_requests, operation);
      decision.claim = group[decision.claim];
      if (!decision.allowed && operation == Operation::acquire) {
        denial = decision;
        break;
      }
      decided.push_back(decision);
    } catch (const StalePolicy& stale) {
      error = std::make_exception_ptr(StalePolicy(stale.stored_version(), group[stale.claim()]));
      break;
    } catch (...) {
      error = std::current_exception();
      break;
    }
  }
  if (operation == Operation::acquire && (denial || error)) {
    // Why one after another, not in a TaskGroup: a caller may abandon the call (destroy its
    // task) while it waits, and a group's members would outlive this frame.
    for (std::size_t g = 0; g < decided.size(); ++g) {
      for (const std::size_t i : groups[g])
        co_await give_back(claims[i], requests[i], decided[g].server_time_us);
    }
  }
  if (error) std::rethrow_exception(error);
  if (denial) {
    ClaimsDecision denied{.decision = *denial};
    co_return denied;
  }
  ClaimsDecision out{.decision = binding_decision(decided),
                     .server_times_us = std::vector<std::int64_t>(requests.size())};
  out.decision.claim = decided[out.decision.claim].claim;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const std::size_t i : groups[g])
      out.server_times_us[i] = decided[g].server_time_us;
  }
  co_return out;
}

/// In process: nothing else runs between the peeks and the takes, and time passing only frees
/// permits, so when every claim's peek allows, every take does.
Decision decide_in_process(const std::vector<HeldClaim>& claims, Operation operation) {
  std::vector<DecideRequest> requests;
  requests.reserve(claims.size());
  for (const HeldClaim& claim : claims)
    requests.push_back(claim.enforcer->request(claim.key, Operation::peek, claim.permits));
  std::vector<Decision> decisions;
  decisions.reserve(claims.size());
  for (std::size_t i = 0; i < claims.size(); ++i)
    decisions.push_back(claims[i].enforcer->local_backend()->decide_now(requests[i]));
  if (const Decision peeked = binding_decision(decisions);
      !peeked.allowed || operation == Operation::peek) {
    return peeked;
  }
  decisions.clear();
  for (std::size_t i = 0; i < claims.size(); ++i) {
    requests[i].operation = Operation::acquire;
    decisions.push_back(claims[i].enforcer->local_backend()->decide_now(requests[i]));
  }
  return binding_decision(decisions);
}

/// In Redis: one script call (one per hash slot across a cluster's); a follower's claim refused
/// as stale is asked again under its policy read again, until the call's deadline; when Redis
/// cannot answer, each claim's failure policy answers for it.
Task<ClaimsDecision> decide_in_redis(const std::vector<HeldClaim>& claims, Operation operation) {
  CommandDispatcher& client = claims.front().enforcer->redis_backend()->dispatcher();
  StaleRetry retry(client.command_deadline(), claims.size());
  for (;;) {
    const RequestsInForce in_force = co_await requests_in_force(claims, operation, retry);
    const std::vector<DecideRequest>& requests = in_force.requests;
    if (in_force.unconfirmed) {
      ClaimsDecision answer{.decision = decide_on_failure(claims, requests, in_force.unconfirmed)};
      co_return answer;
    }
    const auto groups = slot_groups(requests, client.is_cluster());
    std::exception_ptr error;
    try {
      if (groups.size() == 1) {
        // Why named first: g++ 12 mishandles a co_await inside a braced initializer.
        Decision decision = co_await decide_claims_in_redis(client, requests, operation);
        ClaimsDecision decided{.decision = std::move(decision)};
        co_return decided;
      }
      co_return co_await decide_across_slots(claims, requests, groups, operation);
    } catch (const StalePolicy& stale) {
      retry.refused(stale, claims.at(stale.claim()).enforcer->options().name);
      continue;
    } catch (...) {
      error = std::current_exception();
    }
    ClaimsDecision answer{.decision = decide_on_failure(claims, requests, error)};
    co_return answer;
  }
}

/// Each claim's limiter counts the decision and tells its listener, as its own call would, with
/// the Redis time its own key used.
void observe_all(const std::vector<HeldClaim>& held, const ClaimsDecision& decided) {
  for (std::size_t i = 0; i < held.size(); ++i) {
    Decision decision = decided.decision;
    if (!decided.server_times_us.empty()) decision.server_time_us = decided.server_times_us[i];
    held[i].enforcer->observe(decision, held[i].key, held[i].permits);
  }
}

Task<ClaimsDecision> decide_held(const std::vector<HeldClaim>& held, Operation operation) {
  co_await held.front().enforcer->turn().yield_if_due();
  if (held.front().enforcer->redis_backend() == nullptr) {
    ClaimsDecision decided{.decision = decide_in_process(held, operation)};
    co_return decided;
  }
  co_return co_await decide_in_redis(held, operation);
}

Task<Decision> decide_all(std::vector<Claim> claims, Operation operation) {
  const std::vector<HeldClaim> held = checked(claims);
  const ClaimsDecision decided = co_await decide_held(held, operation);
  // Why not a peek: a limiter counts and tells its try_acquire() and acquire() calls only.
  if (operation == Operation::acquire) observe_all(held, decided);
  co_return decided.decision;
}

Task<Decision> acquire_all_owned(std::vector<Claim> claims, OwnedAcquireOptions options) {
  // Why the held claims across the waits: they keep each limiter's state alive, whatever the
  // caller does with the Limiter objects meanwhile.
  const std::vector<HeldClaim> held = checked(claims);
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire_all cancelled before it started");
  const auto started = Clock::now();
  if (std::optional<ClaimsDecision> reserved =
          co_await acquire_all_by_reserving(held, options, started)) {
    observe_all(held, *reserved);
    co_return reserved->decision;
  }
  for (;;) {
    ClaimsDecision decided = co_await decide_held(held, Operation::acquire);
    const Decision& decision = decided.decision;
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    decided.decision.waited = waited;
    if (decision.allowed || decision.retry_after > options.max_wait - waited) {
      observe_all(held, decided);
      co_return decision;
    }
    co_await sleep_for(held.front().enforcer->loop(), decision.retry_after, options.stop);
  }
}

}  // namespace

Task<RequestsInForce> requests_in_force(const std::vector<HeldClaim>& held, Operation operation,
                                        const StaleRetry& retry) {
  RequestsInForce out;
  out.requests.reserve(held.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
    const HeldClaim& claim = held[i];
    std::optional<DecideRequest> unconfirmed;
    try {
      out.requests.push_back(co_await PolicyEnforcer::request_in_force(
          claim.enforcer, claim.key, operation, claim.permits, retry.min_version(i),
          retry.deadline()));
    } catch (const UnconfirmedPolicy& e) {
      unconfirmed.emplace(
          claim.enforcer->request_under(e.policy(), claim.key, operation, claim.permits));
      out.unconfirmed = std::current_exception();
    }
    if (unconfirmed) out.requests.push_back(std::move(*unconfirmed));
  }
  if (held.front().enforcer->redis_backend() != nullptr) check_keys(out.requests);
  co_return out;
}

Decision decide_on_failure(const std::vector<HeldClaim>& held,
                           std::span<const DecideRequest> requests,
                           const std::exception_ptr& error) {
  const std::chrono::microseconds retry_in = retry_in_after(error);
  std::vector<Decision> answers;
  for (std::size_t i = 0; i < held.size(); ++i)
    answers.push_back(held[i].enforcer->decide_on_failure(requests[i], retry_in));
  return binding_decision(answers);
}

void check_keys(std::span<const DecideRequest> requests) {
  std::unordered_map<std::string, std::size_t> claimed;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (const CompiledLimit& limit : requests[i].policy->limits()) {
      const std::string key = requests[i].key_base.str() + limit.key_suffix;
      const auto [at, fresh] = claimed.emplace(key, i);
      if (!fresh) {
        throw InvalidArgument(claim_name(at->second) + " and " + claim_name(i) +
                              " name the same Redis key '" + key +
                              "': claim a (limiter, key) once, with the permits of both");
      }
    }
  }
}

std::vector<DecideRequest> requests_of(const std::vector<DecideRequest>& requests,
                                       const std::vector<std::size_t>& group) {
  std::vector<DecideRequest> out;
  for (const std::size_t i : group)
    out.push_back(requests[i]);
  return out;
}

std::vector<std::vector<std::size_t>> slot_groups(std::span<const DecideRequest> requests,
                                                  bool cluster) {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::uint16_t> slots;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::uint16_t slot = cluster ? key_slot(requests[i].key_base.view()) : 0;
    const auto at = std::find(slots.begin(), slots.end(), slot);
    if (at == slots.end()) {
      slots.push_back(slot);
      groups.push_back({i});
    } else {
      groups[static_cast<std::size_t>(at - slots.begin())].push_back(i);
    }
  }
  return groups;
}

Decision binding_decision(std::span<const Decision> decisions) {
  bool all_allowed = true;
  for (const Decision& decision : decisions)
    all_allowed = all_allowed && decision.allowed;
  std::size_t binding = 0;
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    const Decision& candidate = decisions[i];
    const Decision& best = decisions[binding];
    if (all_allowed
            ? candidate.remaining < best.remaining
            : !candidate.allowed && (best.allowed || candidate.retry_after > best.retry_after)) {
      binding = i;
    }
  }
  Decision out = decisions[binding];
  out.allowed = all_allowed;
  out.claim = binding;
  return out;
}

}  // namespace detail

Task<Decision> try_acquire_all(std::vector<Claim> claims) {
  return detail::decide_all(std::move(claims), detail::Operation::acquire);
}

Task<Decision> acquire_all(std::vector<Claim> claims, AcquireOptions options) {
  // Why built here, not in the coroutine: the stop token is copied before this returns.
  detail::OwnedAcquireOptions owned(options);
  return detail::acquire_all_owned(std::move(claims), std::move(owned));
}

Task<Decision> peek_all(std::vector<Claim> claims) {
  return detail::decide_all(std::move(claims), detail::Operation::peek);
}

}  // namespace redlimit

// try_acquire_all(): one decision over several (limiter, key) claims, all or nothing.

#include "limiter/claims.hpp"

#include <chrono>
#include <unordered_map>

#include "limiter/local_backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/stale_policy.hpp"
#include "limiter/unavailability.hpp"
#include "limiter/validation.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

/// A claim with its limiter's enforcer, which the call keeps alive.
struct HeldClaim {
  std::shared_ptr<PolicyEnforcer> enforcer;
  std::string key;
  std::int64_t permits = 1;
};

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
    held.push_back({enforcer, std::move(claim.key), claim.permits});
  }
  held.front().enforcer->check_thread();
  return held;
}

/// Throws InvalidArgument when two requests name one key (the second would overwrite the
/// first's permits), or, on a cluster, keys of different hash slots.
void check_keys(std::span<const DecideRequest> requests, bool cluster) {
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
    if (cluster && key_slot(requests[i].key_base.view()) != key_slot(requests[0].key_base.view())) {
      throw InvalidArgument(
          claim_name(i) +
          "'s key is in another hash slot than claim 0's: on a cluster, "
          "try_acquire_all takes claims of one slot (give the keys one hash tag, or use one "
          "server); claims across slots are not supported yet");
    }
  }
}

/// In process: nothing else runs between the peeks and the takes, and time passing only frees
/// permits, so when every claim's peek allows, every take does.
Decision decide_in_process(const std::vector<HeldClaim>& claims, Operation operation) {
  std::vector<DecideRequest> requests;
  requests.reserve(claims.size());
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const HeldClaim& claim = claims[i];
    requests.push_back(claim.enforcer->request(claim.key, Operation::peek, claim.permits));
    for (std::size_t j = 0; j < i; ++j) {
      if (claims[j].enforcer == claim.enforcer && claims[j].key == claim.key) {
        throw InvalidArgument(claim_name(j) + " and " + claim_name(i) + " name the same key '" +
                              claim.key +
                              "' of one limiter: claim it once, with the permits "
                              "of both");
      }
    }
  }
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

/// In Redis: one script call; a follower's claim refused as stale is asked again under its
/// policy read again, until the call's deadline; when Redis cannot answer, each claim's
/// failure policy answers for it.
Task<Decision> decide_in_redis(const std::vector<HeldClaim>& claims, Operation operation) {
  CommandDispatcher& client = claims.front().enforcer->redis_backend()->dispatcher();
  const auto deadline = client.command_deadline();
  std::vector<std::int64_t> min_versions(claims.size(), 0);
  for (;;) {
    std::vector<DecideRequest> requests;
    requests.reserve(claims.size());
    for (std::size_t i = 0; i < claims.size(); ++i) {
      const HeldClaim& claim = claims[i];
      requests.push_back(co_await PolicyEnforcer::request_in_force(
          claim.enforcer, claim.key, operation, claim.permits, min_versions[i], deadline));
    }
    check_keys(requests, client.is_cluster());
    std::exception_ptr error;
    try {
      co_return co_await decide_claims_in_redis(client, requests, operation);
    } catch (const StalePolicy& stale) {
      min_versions.at(stale.claim()) = stale.stored_version();
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      std::vector<Decision> answers;
      for (std::size_t i = 0; i < claims.size(); ++i)
        answers.push_back(
            claims[i].enforcer->decide_on_failure(requests[i], retry_in_after(error)));
      co_return binding_decision(answers);
    }
    if (Clock::now() >= deadline) {
      throw TimeoutError(
          "try_acquire_all: a claim's stored policy stayed older than its key's "
          "state until the call's deadline");
    }
  }
}

/// Each claim's limiter counts `decision` and tells its listener, as its own call would.
void observe_all(const std::vector<HeldClaim>& held, const Decision& decision) {
  for (const HeldClaim& claim : held)
    claim.enforcer->observe(decision, claim.key, claim.permits);
}

Task<Decision> decide_held(const std::vector<HeldClaim>& held, Operation operation) {
  co_await held.front().enforcer->turn().yield_if_due();
  // Why not one conditional expression: g++ 12 mishandles a co_await inside one.
  if (held.front().enforcer->redis_backend() == nullptr)
    co_return decide_in_process(held, operation);
  co_return co_await decide_in_redis(held, operation);
}

Task<Decision> decide_all(std::vector<Claim> claims, Operation operation) {
  const std::vector<HeldClaim> held = checked(claims);
  Decision decision = co_await decide_held(held, operation);
  // Why not a peek: a limiter counts and tells its try_acquire() and acquire() calls only.
  if (operation == Operation::acquire) observe_all(held, decision);
  co_return decision;
}

Task<Decision> acquire_all_owned(std::vector<Claim> claims, OwnedAcquireOptions options) {
  // Why the held claims across the waits: they keep each limiter's state alive, whatever the
  // caller does with the Limiter objects meanwhile.
  const std::vector<HeldClaim> held = checked(claims);
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire_all cancelled before it started");
  const auto started = Clock::now();
  for (;;) {
    Decision decision = co_await decide_held(held, Operation::acquire);
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    decision.waited = waited;
    if (decision.allowed || decision.retry_after > options.max_wait - waited) {
      observe_all(held, decision);
      co_return decision;
    }
    co_await sleep_for(held.front().enforcer->loop(), decision.retry_after, options.stop);
  }
}

}  // namespace

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

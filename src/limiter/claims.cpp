// try_acquire_all(): one decision over several (limiter, key) claims, all or nothing.

#include <algorithm>
#include <chrono>
#include <optional>

#include "limiter/lateness.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/unavailability.hpp"
#include "policy/stale_policy.hpp"
#include "policy/validation.hpp"
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
    const std::shared_ptr<PolicyEnforcer>& enforcer = claim.limiter->enforcer();
    if (!enforcer) throw InvalidArgument(claim_name(i) + ": the limiter was moved from");
    const std::string& name = enforcer->options().name;
    if (enforcer->options().shadow) {
      throw InvalidArgument(claim_name(i) + ": limiter '" + name +
                            "' is in shadow mode, which try_acquire_all does not take (its "
                            "denial would deny the other claims)");
    }
    // Why the background work tells: it is the Client's (one per Client), or none in process.
    BackgroundTasks* client = enforcer->backend().background();
    if (i > 0 && client != held.front().enforcer->backend().background()) {
      throw InvalidArgument(claim_name(i) + ": limiter '" + name +
                            "' does not use the Client of claim 0's limiter: the limiters "
                            "of one decision use one Client, or are all in process");
    }
    check_key(claim.key);
    if (claim.permits < 1) {
      throw InvalidArgument(claim_name(i) + ": permits must be at least 1, got " +
                            std::to_string(claim.permits));
    }
    if (client == nullptr) {
      // In process each limiter keeps its own state: a key is claimed twice only on one limiter
      // (in Redis, RedisBackend compares the keys themselves).
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

/// Each claim's limiter counts the decision and tells its listener, as its own call would, with
/// the Redis time its own key used.
void observe_all(const std::vector<HeldClaim>& held, const ClaimsDecision& decided) {
  for (std::size_t i = 0; i < held.size(); ++i) {
    Decision decision = decided.decision;
    if (!decided.server_times_us.empty()) decision.server_time_us = decided.server_times_us[i];
    held[i].enforcer->observe(decision, held[i].key, held[i].permits);
  }
}

/// How acquire_all() waits, for run_claims().
struct Waiting {
  const OwnedAcquireOptions& options;
  Clock::time_point started;
};

/// One attempt of run_claims() under the policies of at least `retry`'s versions (a follower's
/// claim: its stored policy, read by the retry's deadline).
Task<Attempted> claims_in_force(const std::vector<HeldClaim>& held,
                                const std::vector<Backend*>& backends, Operation operation,
                                const Waiting* waiting, const StaleRetry& retry) {
  co_await held.front().enforcer->turn().yield_if_due();
  std::vector<DecideRequest> requests;
  requests.reserve(held.size());
  // Set when a follower's claim could not confirm its stored policy (UnconfirmedPolicy): its
  // request is under the policy read last, and the call is the failure policies' to answer.
  std::exception_ptr unconfirmed;
  for (std::size_t i = 0; i < held.size(); ++i) {
    const HeldClaim& claim = held[i];
    PolicyEnforcer::InForce in_force = co_await PolicyEnforcer::request_in_force(
        claim.enforcer, claim.key, operation, claim.permits, retry.min_version(i),
        retry.deadline());
    if (in_force.unconfirmed) unconfirmed = in_force.unconfirmed;
    requests.push_back(std::move(in_force.request));
    requests.back().claim = i;
  }
  std::exception_ptr error = unconfirmed;
  // Reserved on when each policy is a single gcra, token_bucket or leaky_bucket limit (else
  // asked again at each retry_after).
  const bool reserving = waiting && std::ranges::all_of(requests, [](const DecideRequest& request) {
                           return request.policy->reservable();
                         });
  std::optional<ClaimsDecision> decided;
  if (!error) {
    try {
      if (reserving) {
        decided = co_await reserve_and_wait(held, requests, waiting->options, waiting->started);
      } else {
        // Why only an acquire_all() that waits is late: try_acquire_all() takes no max_lateness.
        const Lateness lateness(waiting ? waiting->options.max_lateness
                                        : std::chrono::microseconds::max());
        decided = co_await backends.front()->decide_claims(backends, requests, operation);
        const Decision& decision = decided->decision;
        if (decision.allowed && decision.source == Source::redis && lateness.too_late())
          refuse_late(held);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!reserving && held.size() > 1 && (error || !decided->decision.allowed)) {
    // Why: across a cluster's slots, the slots that took gave their take back (redis_claims.cpp),
    // and a denial of one of those keys remembered meanwhile would refuse the permits it freed.
    // In one slot nothing was taken; forgotten, a denial costs one more round trip.
    for (std::size_t i = 0; i < held.size(); ++i)
      held[i].enforcer->forget_denial(requests[i].key_base.view());
  }
  if (error) {
    // Each claim's failure policy answers, as one decision; an error that is not unavailability
    // (a StalePolicy too, for the ask-again stage) is rethrown.
    const std::chrono::microseconds retry_in = retry_in_after(error);
    std::vector<Decision> answers;
    for (std::size_t i = 0; i < held.size(); ++i)
      answers.push_back(held[i].enforcer->decide_on_failure(requests[i], retry_in));
    decided.emplace(ClaimsDecision{.decision = binding_decision(answers)});
  }
  // Why an unconfirmed policy's answer is final: the next call reads the policy again.
  const bool wait_out = waiting && !reserving && !unconfirmed;
  co_return Attempted{.decision = decided, .wait_out = wait_out};
}

/// The claims decided by their backends under the policies in force (`waiting`: reserved and
/// waited for, reserve_and_wait(), or decided to be waited out when they cannot be reserved
/// on): a follower's claim refused as stale is asked again under its policy read again, until
/// the call's deadline or its stop request; when Redis cannot answer, each claim's failure policy
/// answers for it. None only when `waiting` and the parts were given back or moved: a new place in
/// the queues.
Task<Attempted> run_claims(const std::vector<HeldClaim>& held, Operation operation,
                           const Waiting* waiting) {
  // Why the earliest deadline: a call over the claims stops asking again after StalePolicy when
  // the first of their limiters would (StaleRetry).
  std::vector<Backend*> backends;
  auto deadline = Clock::time_point::max();
  for (const HeldClaim& claim : held) {
    backends.push_back(&claim.enforcer->backend());
    deadline = std::min(deadline, claim.enforcer->stale_deadline());
  }
  const auto attempt = [&](const StaleRetry& retry) {
    return claims_in_force(held, backends, operation, waiting, retry);
  };
  const auto name = [&](std::size_t claim) {
    return std::string_view(held.at(claim).enforcer->options().name);
  };
  StaleRetry retry(deadline, held.size(),
                   waiting != nullptr ? waiting->options.stop : std::stop_token());
  co_return co_await asking_again(std::move(retry), attempt, name);
}

Task<Decision> decide_all(std::vector<Claim> claims, Operation operation) {
  const std::vector<HeldClaim> held = checked(claims);
  const Attempted decided = co_await run_claims(held, operation, nullptr);
  // Why not a peek: a limiter counts and tells its try_acquire() and acquire() calls only.
  if (operation == Operation::acquire) observe_all(held, *decided.decision);
  co_return decided.decision->decision;
}

Task<Decision> acquire_all_owned(std::vector<Claim> claims, OwnedAcquireOptions options) {
  // Why the held claims across the waits: they keep each limiter's state alive, whatever the
  // caller does with the Limiter objects meanwhile.
  const std::vector<HeldClaim> held = checked(claims);
  check_max_wait(options.max_wait);
  check_max_lateness(options.max_lateness);
  if (options.stop.stop_requested()) throw Cancelled("acquire_all cancelled before it started");
  const BackgroundTasks::WaitingCall closing(held.front().enforcer->backend().background(),
                                             options.stop);
  const Waiting waiting{options, Clock::now()};
  const auto attempt = [&] { return run_claims(held, Operation::acquire, &waiting); };
  const ClaimsDecision decided = co_await waiting_out(held.front().enforcer->loop(), nullptr,
                                                      options, waiting.started, attempt);
  observe_all(held, decided);
  co_return decided.decision;
}

}  // namespace

BackendOp give_back_op(const DecideRequest& request, std::optional<CancelTicket> ticket,
                       std::int64_t taken_at_us) {
  if (ticket) return ReservationOp{ReservationOperation::cancel, request, *ticket};
  return AdjustOp{request, Adjustment::give_back, request.permits, taken_at_us};
}

Task<void> give_back_claims(Backend& backend, std::vector<BackendOp> give_backs) {
  try {
    co_await backend.run(give_backs);
  } catch (...) {
  }
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

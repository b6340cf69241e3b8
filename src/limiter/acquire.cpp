// PolicyEnforcer::acquire(): reservations (one round trip, FIFO, cancellable) for single-limit
// gcra, token_bucket and leaky_bucket policies; asking again at retry_after for the others.

#include "limiter/lateness.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/unavailability.hpp"
#include "policy/stale_policy.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {

using Clock = std::chrono::steady_clock;

Task<Decision> PolicyEnforcer::wait_and_acquire(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, std::int64_t permits,
                                                OwnedAcquireOptions options) {
  check_key(key);
  check_max_wait(options.max_wait);
  check_max_lateness(options.max_lateness);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const BackgroundTasks::WaitingCall waiting(self->backend().background(), options.stop);
  const auto started = Clock::now();
  const auto in_force = [&](const StaleRetry& retry) {
    return self->acquire_in_force(key, permits, options, started, retry);
  };
  const auto attempt = [&] {
    // Why a new retry each time: the call waited, and takes a new place in the queues.
    StaleRetry retry(self->stale_deadline(), 1, options.stop);
    return asking_again(std::move(retry), in_force, self->named());
  };
  const ClaimsDecision decided =
      co_await waiting_out(self->loop_, self->waiters_gauge(), options, started, attempt);
  co_return decided.decision;
}

Task<Attempted> PolicyEnforcer::acquire_in_force(const std::string& key, std::int64_t permits,
                                                 const OwnedAcquireOptions& options,
                                                 Clock::time_point started,
                                                 const StaleRetry& retry) {
  InForce in_force = co_await request_in_force(shared_from_this(), key, Operation::acquire, permits,
                                               retry.min_version(), retry.deadline());
  if (in_force.unconfirmed) {
    co_return Attempted{.decision =
                            ClaimsDecision{.decision = answer_unconfirmed(in_force.request)}};
  }
  if (!in_force.request.policy->reservable()) {
    // Why decide() each time: each attempt asks under the policy in force then.
    const Lateness lateness(options.max_lateness);
    Decision decided = co_await decide(shared_from_this(), key, Operation::acquire, permits, false);
    if (decided.allowed && decided.source == Source::redis && lateness.too_late()) {
      count_late();
      decided = decide_on_failure(in_force.request, {});
    }
    co_return Attempted{.decision = ClaimsDecision{.decision = decided}, .wait_out = true};
  }
  const HeldClaim claim{shared_from_this(), key, permits};
  std::optional<ClaimsDecision> reserved;
  try {
    reserved = co_await reserve_and_wait(std::span(&claim, 1), std::span(&in_force.request, 1),
                                         options, started);
  } catch (...) {
    // The failure policy answers what kept Redis from answering (or came too late);
    // retry_in_after() rethrows the rest: a StalePolicy goes to the ask-again stage, where a
    // follower reads its policy again and asks once more.
    const std::chrono::microseconds retry_in = retry_in_after(std::current_exception());
    reserved = ClaimsDecision{.decision = decide_on_failure(in_force.request, retry_in)};
  }
  if (reserved && source_->stored())
    reserved->decision.policy_version = in_force.request.policy->epoch().version;
  co_return Attempted{.decision = reserved};
}

}  // namespace redlimit::detail

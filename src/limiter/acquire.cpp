// PolicyEnforcer::acquire(): reservations (one round trip, FIFO, cancellable) for single-limit
// gcra, token_bucket and leaky_bucket policies; asking again at retry_after for the others.

#include "algorithms/reservations.hpp"
#include "limiter/lateness.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/unavailability.hpp"
#include "policy/stale_policy.hpp"
#include "policy/validation.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/background_tasks.hpp"
#include "runtime/outliving_call.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// The longest max_wait the scripts take; they shorten it to the longest wait they keep exact
/// (longest_reservation_wait_us).
constexpr std::int64_t max_reservation_wait_us = max_exact;

}  // namespace

Task<Decision> PolicyEnforcer::wait_and_acquire(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, std::int64_t permits,
                                                OwnedAcquireOptions options) {
  check_key(key);
  check_max_wait(options.max_wait);
  check_max_lateness(options.max_lateness);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const auto started = Clock::now();
  const auto attempt = [&](const StaleRetry& retry) {
    return self->acquire_in_force(key, permits, options, started, retry);
  };
  for (;;) {
    // Why a new retry each time: the call waited, and takes a new place in the queues.
    StaleRetry retry(self->stale_deadline(), 1, options.stop);
    Attempted<Decision> attempted = co_await asking_again(std::move(retry), attempt, self->named());
    // Its policy was replaced, or its slot was given back or passed unused: it reserves again
    // under the policy in force, a new place at the back.
    if (!attempted.decision) continue;
    Decision& decision = *attempted.decision;
    decision.waited = since(started);
    if (!attempted.wait_out || decision.allowed ||
        decision.retry_after > options.max_wait - decision.waited) {
      co_return decision;
    }
    const GaugeScope waiting(self->waiters_gauge(), options.slept);
    co_await sleep_for(self->loop_, decision.retry_after, options.stop);
  }
}

Task<Attempted<Decision>> PolicyEnforcer::acquire_in_force(const std::string& key,
                                                           std::int64_t permits,
                                                           const OwnedAcquireOptions& options,
                                                           Clock::time_point started,
                                                           const StaleRetry& retry) {
  InForce in_force = co_await request_in_force(shared_from_this(), key, Operation::acquire, permits,
                                               retry.min_version(), retry.deadline());
  if (in_force.unconfirmed) {
    co_return Attempted<Decision>{.decision = answer_unconfirmed(in_force.request)};
  }
  if (!in_force.request.policy->reservable()) {
    // Why decide() each time: each attempt asks under the policy in force then.
    const Lateness lateness(options.max_lateness);
    Decision decided = co_await decide(shared_from_this(), key, Operation::acquire, permits, false);
    if (decided.allowed && decided.source == Source::redis && lateness.too_late())
      decided = answer_late(in_force.request);
    co_return Attempted<Decision>{.decision = decided, .wait_out = true};
  }
  OwnedAcquireOptions rest = options;
  rest.max_wait = options.max_wait - std::min(options.max_wait, since(started));
  const std::int64_t version = in_force.request.policy->epoch().version;
  std::optional<Decision> reserved =
      co_await acquire_by_reserving(std::move(in_force.request), key, rest);
  if (reserved && source_->stored()) reserved->policy_version = version;
  co_return Attempted<Decision>{.decision = reserved};
}

Task<void> PolicyEnforcer::give_back_orphan(std::shared_ptr<PolicyEnforcer> enforcer,
                                            Backend* backend, DecideRequest reserved,
                                            std::string key, Reservation made) {
  // Allowed at once, the permits were taken as a decision is (nobody to give them to).
  if (!made.decision.allowed || made.wait_us == 0) co_return;
  DecideRequest refund = enforcer->give_back_request(reserved, backend, key);
  co_await backend->cancel(std::move(refund), ticket_of(made));
}

Task<std::optional<Decision>> PolicyEnforcer::acquire_by_reserving(DecideRequest request,
                                                                   std::string key,
                                                                   OwnedAcquireOptions options) {
  // Why before the turn: a follower's request was confirmed with the server at this contact.
  const std::uint64_t contact = redis_ != nullptr ? redis_->contact() : 0;
  co_await turn_.yield_if_due();
  const auto started = Clock::now();
  // Why kept: a fallback's reservation is made under another policy (the scaled one).
  const std::shared_ptr<const CompiledPolicy> reserved_under = request.policy;
  const std::int64_t max_wait = std::min(options.max_wait.count(), max_reservation_wait_us);
  // Why before reserving: a cancellation announced before our reply arrives is kept for us.
  WaiterRegistry::Watch watch = waiters_.watch(request);

  // Reserve in Redis, or, when Redis cannot answer, as the failure policy says.
  Backend* backend = backend_.get();
  std::optional<Reservation> reservation;
  std::chrono::microseconds retry_in{};
  std::exception_ptr error;
  const Lateness lateness(options.max_lateness);
  try {
    if (BackgroundTasks* tasks = backend_->background()) {
      // Why outliving: a caller destroyed before the reply leaves a reservation nobody waits
      // on; it is given back when the reply comes (issue 33, bug 8).
      std::function<Task<void>(Reservation)> orphaned =
          [self = shared_from_this(), backend = backend_.get(), reserved = request,
           key](Reservation made) { return give_back_orphan(self, backend, reserved, key, made); };
      reservation = co_await outliving(*tasks, backend_->reserve(request, max_wait), orphaned);
    } else {
      reservation = co_await backend_->reserve(request, max_wait);
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Why retry_in_after() first: it rethrows what is not unavailability; a StalePolicy goes to
  // the ask-again stage, where a follower reads its policy again and asks once more.
  if (error) retry_in = retry_in_after(error);
  if (!reservation) {
    if (options_.on_failure.kind != FailurePolicy::local_fallback || !fallback_ ||
        !fits_fallback(request)) {
      Decision decision = decide_on_failure(request, retry_in);
      decision.waited = since(started);
      co_return decision;
    }
    request = fallback_request(request);
    backend = fallback_.get();
    reservation = fallback_->reserve_now(request, max_wait);
    reservation->decision.source = Source::fallback;
  }

  Decision decision = reservation->decision;
  if (!decision.allowed && decision.retry_after <= options.max_wait &&
      decision.retry_after.count() > longest_reservation_wait_us(reservation->reserved_at_us)) {
    throw InvalidArgument("acquire(): the wait of " + std::to_string(decision.retry_after.count()) +
                          " us reaches past 2^52 us since the epoch (the year 2112), the latest "
                          "slot a reservation keeps exact");
  }
  // A follower's reservation made on a server reached after the contact broke (a retry after a
  // failover) may be under a version that server lost: it is given back (below) and made again
  // once the policy is read again.
  const bool crossed =
      source_->stored() && backend == backend_.get() && contact != redis_->contact();
  // Answered too late to be used in time (AcquireOptions::max_lateness): given back, if its
  // slot is still ahead, and answered as if Redis had not answered.
  const bool late = decision.allowed && decision.source == Source::redis && lateness.too_late();
  if (!decision.allowed || (reservation->wait_us == 0 && !crossed)) {
    if (late) decision = answer_late(request);
    decision.waited = since(started);
    co_return decision;
  }

  WaiterRegistry::Waiter waiter;
  waiter.slot = reservation->slot;
  waiter.den = reservation->den;
  waiter.d = reservation->d;
  waiter.reserved_at_us = reservation->reserved_at_us;
  waiter.reserved_slot = reservation->slot;
  waiter.book = reservation->book;
  waiter.heard = reservation->book.cancels;
  waiter.wake = Clock::now() + std::chrono::microseconds(reservation->wait_us);
  // Cancellation notices come from Redis; a fallback reservation waits its time as reserved.
  if (backend == backend_.get()) watch.add(&waiter);

  WaitingPart part{.enforcer = shared_from_this(),
                   .backend = backend,
                   .reserved = &request,
                   .waits_under = reserved_under.get(),
                   .key = key,
                   .waiter = &waiter};
  const std::span<WaitingPart> parts(&part, 1);
  if (crossed || late) {
    co_await give_back_parts(parts);
    if (!late) co_return std::nullopt;
    decision = answer_late(request);
    decision.waited = since(started);
    co_return decision;
  }
  // A reservation registered under the owner lease (docs/waiting.md): renewed every third of
  // the lease while its slot is later than the last expiry Redis confirmed.
  part.renewal->confirmed = backend == backend_.get() ? reservation->lease_expiry_us : 0;
  const auto renew_every = std::chrono::microseconds(
      std::max<std::int64_t>(1, (part.renewal->confirmed - reservation->reserved_at_us) / 3));
  std::optional<GaugeScope> waiting(std::in_place, waiters_gauge(), options.slept);
  const WaitOutcome outcome =
      co_await claim_when_due(loop_, parts, renew_every, options, "acquire");
  waiting.reset();
  if (outcome.error) {
    Decision failed = decide_on_failure(request, retry_in_after(outcome.error));
    failed.waited = since(started);
    co_return failed;
  }
  if (!outcome.slot) co_return std::nullopt;
  if (decision.source == Source::redis) {
    decision.server_time_us = outcome.slot->ceil_us();
    if (lateness.too_late(decision.server_time_us - reservation->reserved_at_us))
      decision = answer_late(request);
  }
  decision.waited = since(started);
  co_return decision;
}

}  // namespace redlimit::detail

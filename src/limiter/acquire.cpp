// PolicyEnforcer::acquire(): reservations (one round trip, FIFO, cancellable) for single-limit
// gcra, token_bucket and leaky_bucket policies; asking again at retry_after for the others.

#include "algorithms/reservations.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/stale_policy.hpp"
#include "limiter/unavailability.hpp"
#include "limiter/validation.hpp"
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

std::chrono::microseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

bool reservable(const CompiledPolicy& policy) {
  return policy.limits().size() == 1 && can_reserve(policy.limits().front().limit.algorithm);
}

/// True if Redis has the waiter's reservation where the waiter has it: not given back, and
/// moved by no cancellation the waiter did not hear of (moved as WaiterRegistry moves it).
bool where_known(const StandingOutcome& where, const WaiterRegistry::Waiter& waiter) {
  switch (where.standing) {
    case ReservationStanding::as_reserved:
      return true;
    case ReservationStanding::moved: {
      const FracTime at =
          where.slot.us < waiter.reserved_at_us ? FracTime{waiter.reserved_at_us, 0} : where.slot;
      return at.us == waiter.slot.us && at.frac == waiter.slot.frac;
    }
    case ReservationStanding::given_back:
    case ReservationStanding::unknown:
      return false;
  }
  return false;
}

}  // namespace

Task<Decision> PolicyEnforcer::acquire_unobserved(std::shared_ptr<PolicyEnforcer> self,
                                                  std::string key, std::int64_t permits,
                                                  OwnedAcquireOptions options) {
  if (self->follower_) {
    co_return co_await acquire_following(self, std::move(key), permits, std::move(options));
  }
  DecideRequest validated_request = self->request(key, Operation::acquire, permits);
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  if (!reservable(*validated_request.policy)) {
    co_return co_await self->acquire_by_retrying(std::move(validated_request), std::move(options));
  }
  const auto started = Clock::now();
  for (;;) {
    OwnedAcquireOptions rest = options;
    rest.max_wait = options.max_wait - std::min(options.max_wait, since(started));
    std::optional<Decision> decision =
        co_await self->acquire_by_reserving(std::move(validated_request), key, rest);
    if (decision) {
      decision->waited = since(started);
      co_return *decision;
    }
    // set_policy() replaced the policy it waited under: it reserves again under this one.
    validated_request = self->request(key, Operation::acquire, permits);
    if (!reservable(*validated_request.policy)) {
      rest.max_wait = options.max_wait - std::min(options.max_wait, since(started));
      Decision retried = co_await self->acquire_by_retrying(std::move(validated_request), rest);
      retried.waited = since(started);
      co_return retried;
    }
  }
}

Task<Decision> PolicyEnforcer::acquire_by_retrying(DecideRequest request,
                                                   OwnedAcquireOptions options) {
  const auto started = Clock::now();
  for (;;) {
    Decision decision = co_await decide(request, nullptr);  // acquire() keeps the enforcer
    const auto waited = since(started);
    decision.waited = waited;
    if (decision.allowed || decision.retry_after > options.max_wait - waited) co_return decision;
    const GaugeScope waiting(waiters_gauge(), options.slept);
    co_await sleep_for(loop_, decision.retry_after, options.stop);
  }
}

Task<void> PolicyEnforcer::give_back(std::shared_ptr<PolicyEnforcer> enforcer, Backend* backend,
                                     DecideRequest request, CancelTicket ticket) {
  (void)enforcer;  // keeps the backend alive until this ends
  co_await backend->cancel(std::move(request), ticket);
}

Task<void> PolicyEnforcer::give_back_orphan(std::shared_ptr<PolicyEnforcer> enforcer,
                                            Backend* backend, DecideRequest reserved,
                                            std::string key, Reservation made) {
  // Allowed at once, the permits were taken as a decision is (nobody to give them to).
  if (!made.decision.allowed || made.wait_us == 0) co_return;
  DecideRequest refund = enforcer->give_back_request(reserved, backend, key);
  co_await give_back(std::move(enforcer), backend, std::move(refund), ticket_of(made));
}

/// What a waiter and the renewal of its owner lease share. Why beside the waiter, not awaited
/// by it: a renewal Redis does not answer would hold the waiter past its wake for up to a
/// command timeout, and the claim at the wake for one more.
struct PolicyEnforcer::LeaseRenewal {
  std::int64_t confirmed = 0;  ///< the latest lease expiry Redis confirmed (Redis time, us)
  bool in_flight = false;
  bool reclaimed = false;            ///< Redis answered that the reservation was given back
  std::exception_ptr error;          ///< an error that is not unavailability, for the waiter
  std::stop_source* wake = nullptr;  ///< the waiter's sleep, while it sleeps
};

Task<void> PolicyEnforcer::renew_beside(std::shared_ptr<PolicyEnforcer> enforcer, Backend* backend,
                                        DecideRequest request, std::int64_t version,
                                        std::shared_ptr<LeaseRenewal> renewal) {
  (void)enforcer;  // keeps the backend alive until this ends
  try {
    const std::int64_t expiry = co_await backend->renew_reservation(std::move(request), version);
    renewal->reclaimed = expiry == 0;
    renewal->confirmed = std::max(renewal->confirmed, expiry);
  } catch (...) {
    // Redis could not answer: renewed again at the next turn, or claimed at the wake.
    if (!means_unavailable(std::current_exception())) renewal->error = std::current_exception();
  }
  renewal->in_flight = false;
  if (renewal->wake != nullptr) renewal->wake->request_stop();  // the waiter looks again
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
  } catch (const StalePolicy&) {
    throw;  // a follower reads its policy again and asks once more
  } catch (...) {
    error = std::current_exception();
  }
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
  const bool crossed = follower_ && backend == backend_.get() && contact != redis_->contact();
  if (!decision.allowed || (reservation->wait_us == 0 && !crossed)) {
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

  // Why a guard: if the waiting task is destroyed, its reservation is still given back.
  struct GiveBackOnDestruction {
    PolicyEnforcer& enforcer;
    Backend* backend;
    const DecideRequest& request;
    std::string_view key;
    const WaiterRegistry::Waiter& waiter;
    bool armed = true;
    ~GiveBackOnDestruction() {
      if (!armed) return;
      // The enforcer is alive: acquire()'s frame, which awaits this one, keeps it.
      try {
        Task<void> refund =
            give_back(enforcer.shared_from_this(), backend,
                      enforcer.give_back_request(request, backend, key), waiter.ticket());
        // Why the client's background work: Client::close() lets the refund reach Redis first.
        if (BackgroundTasks* tasks = enforcer.backend_->background()) {
          tasks->start(std::move(refund));
        } else {
          spawn(enforcer.loop_, std::move(refund));
        }
      } catch (...) {
        report_error(std::current_exception());  // out of memory: the permits come back at expiry
      }
    }
  } guard{*this, backend, request, key, waiter};

  struct Forward {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
  };
  // A reservation registered under the owner lease (docs/waiting.md): renewed every third of
  // the lease while its slot is later than the last expiry Redis confirmed (`confirmed`).
  // Why slot and expiry compare directly: both are Redis times; once the slot is at or before
  // the confirmed expiry, any reclaim (after that expiry) finds the slot due.
  const auto renewal = std::make_shared<LeaseRenewal>();
  renewal->confirmed = backend == backend_.get() ? reservation->lease_expiry_us : 0;
  const bool registered = renewal->confirmed != 0;
  const auto renew_every = std::chrono::microseconds(
      std::max<std::int64_t>(1, (renewal->confirmed - reservation->reserved_at_us) / 3));
  const auto unconfirmed = [&] { return registered && waiter.slot.ceil_us() > renewal->confirmed; };
  // Why: a renewal that ends after this frame is gone must not wake it.
  struct ForgetWakeOnExit {
    LeaseRenewal& renewal;
    ~ForgetWakeOnExit() { renewal.wake = nullptr; }
  } forget_wake{*renewal};
  auto next_renewal = Clock::now() + renew_every;
  std::optional<GaugeScope> waiting(std::in_place, waiters_gauge(), options.slept);
  bool replaced = crossed;
  while (!replaced) {
    if (renewal->error) std::rethrow_exception(renewal->error);
    const auto current = Clock::now();
    if (current >= waiter.wake || renewal->reclaimed) break;
    // Why before the slot: a change reaches the waiters (the slot is the old policy's).
    if (!options.stop.stop_requested() && superseded(*reserved_under, key)) {
      replaced = true;
      break;
    }
    const bool renewing = unconfirmed() && !renewal->in_flight;
    if (renewing && current >= next_renewal) {
      next_renewal = current + renew_every;
      renewal->in_flight = true;
      Task<void> renew =
          renew_beside(shared_from_this(), backend, give_back_request(request, backend, key),
                       waiter.book.version, renewal);
      // Why the client's upkeep, not work for the caller: Client::close() waits for that
      // first, and waiters renewing one after another would hold it for as long as they wait.
      // A renewal the client no longer sends is made good by the claim at the wake. Only a
      // reservation registered in Redis is renewed, so the backend has a client.
      backend->background()->start_upkeep(std::move(renew));
      continue;
    }
    const auto until = renewing ? std::min(waiter.wake, next_renewal) : waiter.wake;
    std::stop_source wake_early;
    waiter.reschedule = &wake_early;
    renewal->wake = &wake_early;
    std::stop_callback<Forward> forward(options.stop, Forward{&wake_early});
    bool woken = false;
    try {
      co_await sleep_for(loop_, std::chrono::ceil<std::chrono::microseconds>(until - current),
                         wake_early.get_token());
    } catch (const Cancelled&) {
      woken = true;
    }
    waiter.reschedule = nullptr;
    renewal->wake = nullptr;
    if (woken && options.stop.stop_requested()) break;
  }
  waiting.reset();
  if (replaced) {
    // Given back under the policy in force (its terms; the reservation's own when none is),
    // then reserved again by the caller. A give-back Redis does not answer leaves the permits
    // taken until their slot: under-admission, never over. One refused as stale goes to the
    // follower's call, which reads its policy again and reserves under it.
    guard.armed = false;
    try {
      co_await backend->cancel(give_back_request(request, backend, key), waiter.ticket());
    } catch (const Unavailable&) {
    }
    co_return std::nullopt;
  }
  bool reclaimed = renewal->reclaimed;
  // Why decided once: a stop that came after the wake does not cancel (the slot has come).
  const bool cancelling = options.stop.stop_requested() && Clock::now() < waiter.wake;
  // Why asked when a notice may have been missed: the slot may have moved earlier without this
  // waiter knowing. Redis charged the permits there, long past; used now, they would join
  // whatever the key, idle again, gives others meanwhile (docs/waiting.md).
  const bool uninformed = backend == backend_.get() && !watch.informed(waiter);
  if (!reclaimed && !cancelling && (uninformed || unconfirmed())) {
    // Woke later than any expiry confirmed, or maybe elsewhere than Redis has the slot: the
    // reservation is the caller's only if still held, where the caller has it.
    guard.armed = false;
    std::optional<bool> usable;
    std::exception_ptr claim_error;
    try {
      const DecideRequest claim = give_back_request(request, backend, key);
      if (uninformed) {
        const ReservationCheck check = co_await backend->check_reservation(claim, waiter.ticket());
        usable = (check.lease_held || !unconfirmed()) && where_known(check.where, waiter);
      } else {
        usable = co_await backend->claim_reservation(claim, waiter.book.version);
      }
    } catch (...) {
      claim_error = std::current_exception();
    }
    if (claim_error) retry_in = retry_in_after(claim_error);
    if (!usable) {
      Decision failed = decide_on_failure(request, retry_in);
      failed.waited = since(started);
      co_return failed;
    }
    reclaimed = !*usable;
  }
  if (reclaimed) {
    // Given back while this process could not renew, or moved earlier while it did not hear
    // (that slot passed unused): a new place at the back of the queue.
    guard.armed = false;
    const auto waited = since(started);
    OwnedAcquireOptions rest = options;
    rest.max_wait = options.max_wait - std::min(options.max_wait, waited);
    std::optional<Decision> again =
        co_await acquire_by_reserving(std::move(request), std::move(key), rest);
    if (again) again->waited += waited;
    co_return again;
  }
  guard.armed = false;
  if (cancelling) {
    // If Redis finds the slot already due, the permits were used and are the caller's: the
    // decision stands. Otherwise the caller stops without them, whether they went back or not
    // (the key was reset meanwhile, or Redis could not be asked).
    // Why the policy in force: the key is carried over to it and the permits come back in its
    // terms; the ticket keeps the reservation's own step for the waiters behind
    // (lua/reservations/cancel.lua).
    std::optional<CancelVerdict> verdict;
    try {
      verdict = co_await backend->cancel(give_back_request(request, backend, key), waiter.ticket());
    } catch (const Unavailable&) {
    }
    if (!verdict) {
      throw Cancelled(
          "acquire cancelled while waiting; Redis did not answer whether its reservation was "
          "given back");
    }
    if (*verdict == CancelVerdict::returned || *verdict == CancelVerdict::already_returned)
      throw Cancelled("acquire cancelled while waiting; its reservation was given back");
    if (*verdict == CancelVerdict::refused)
      throw Cancelled("acquire cancelled while waiting; the key was reset since its reservation");
    if (unconfirmed()) {
      // Due, but its lease may have lapsed and its permits gone back: not the caller's.
      throw Cancelled(
          "acquire cancelled while waiting; its reservation's lease had lapsed, and it may have "
          "been given back");
    }
  }
  decision.waited = since(started);
  if (decision.source == Source::redis) decision.server_time_us = waiter.slot.ceil_us();
  co_return decision;
}

}  // namespace redlimit::detail

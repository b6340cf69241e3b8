// PolicyEnforcer::acquire(): reservations (one round trip, FIFO, cancellable) for single-limit
// gcra, token_bucket and leaky_bucket policies; asking again at retry_after for the others.

#include "algorithms/reservations.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/unavailability.hpp"
#include "policy/stale_policy.hpp"
#include "policy/unconfirmed_policy.hpp"
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

Task<Decision> PolicyEnforcer::wait_and_acquire(std::shared_ptr<PolicyEnforcer> self,
                                                std::string key, std::int64_t permits,
                                                OwnedAcquireOptions options) {
  check_key(key);
  check_max_wait(options.max_wait);
  if (options.stop.stop_requested()) throw Cancelled("acquire cancelled before it started");
  const auto started = Clock::now();
  StaleRetry retry(self->stale_deadline());
  for (;;) {
    std::optional<DecideRequest> in_force;
    std::optional<Decision> unconfirmed;
    try {
      in_force.emplace(co_await request_in_force(self, key, Operation::acquire, permits,
                                                 retry.min_version(), retry.deadline()));
    } catch (const UnconfirmedPolicy& e) {
      unconfirmed = self->answer_unconfirmed(
          self->request_under(e.policy(), key, Operation::acquire, permits));
    }
    if (unconfirmed) {
      unconfirmed->waited = since(started);
      co_return *unconfirmed;
    }
    OwnedAcquireOptions rest = options;
    rest.max_wait = options.max_wait - std::min(options.max_wait, since(started));
    try {
      if (reservable(*in_force->policy)) {
        const std::int64_t version = in_force->policy->epoch().version;
        std::optional<Decision> reserved =
            co_await self->acquire_by_reserving(std::move(*in_force), key, rest);
        if (reserved) {
          reserved->waited = since(started);
          if (self->source_->stored()) reserved->policy_version = version;
          co_return *reserved;
        }
        // The policy it waited under was replaced: it reserves again under the one in force.
        retry.restart(self->stale_deadline());
        continue;
      }
    } catch (const StalePolicy& stale) {
      // A cancelled wait whose give-back was refused as stale ends cancelled, not asked again.
      if (options.stop.stop_requested()) throw Cancelled("acquire cancelled while waiting");
      retry.refused(stale, self->options_.name);
      continue;
    }
    // Why decide() each time: each attempt asks under the policy in force then.
    Decision decision = co_await decide(self, key, Operation::acquire, permits, false);
    decision.waited = since(started);
    if (decision.allowed || decision.retry_after > options.max_wait - decision.waited) {
      co_return decision;
    }
    const GaugeScope waiting(self->waiters_gauge(), options.slept);
    co_await sleep_for(self->loop_, decision.retry_after, options.stop);
    retry.restart(self->stale_deadline());
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
  const bool crossed =
      source_->stored() && backend == backend_.get() && contact != redis_->contact();
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

  WaitingPart part{.enforcer = shared_from_this(),
                   .backend = backend,
                   .reserved = &request,
                   .waits_under = reserved_under.get(),
                   .key = key,
                   .waiter = &waiter};
  // A reservation registered under the owner lease (docs/waiting.md): renewed every third of
  // the lease while its slot is later than the last expiry Redis confirmed.
  part.renewal->confirmed = backend == backend_.get() ? reservation->lease_expiry_us : 0;
  const auto renew_every = std::chrono::microseconds(
      std::max<std::int64_t>(1, (part.renewal->confirmed - reservation->reserved_at_us) / 3));
  const auto unconfirmed = [&] { return part.unconfirmed(); };
  std::optional<GaugeScope> waiting(std::in_place, waiters_gauge(), options.slept);
  bool replaced = crossed;
  if (!replaced) {
    const WaitEnd end =
        co_await sleep_until_due(loop_, std::span<WaitingPart>(&part, 1), renew_every, options);
    replaced = end == WaitEnd::superseded;
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
  bool reclaimed = part.renewal->reclaimed;
  // Why decided once: a stop that came after the wake does not cancel (the slot has come).
  const bool cancelling = options.stop.stop_requested() && Clock::now() < waiter.wake;
  // Why asked at every wake on Redis: a cancellation ahead may have moved the slot earlier while
  // its notice is still on its way (pub/sub tells of a late or lost message by none, or by the
  // next one). Redis charged the permits there; used now, they would join those of the waiters
  // behind, which the notice moved up to this waiter's old slot (two 3-permit waits at one time
  // on a burst of 5), and whatever the key gives others meanwhile (docs/waiting.md). Registered
  // under its owner's lease and woken later than any expiry confirmed, the reservation is the
  // caller's only if still held. In process a notice is applied as the cancellation is made.
  const bool on_redis = backend == backend_.get() && redis_ != nullptr;
  if (!reclaimed && !cancelling && on_redis) {
    guard.armed = false;
    std::optional<bool> usable;
    std::exception_ptr claim_error;
    try {
      const DecideRequest claim = give_back_request(request, backend, key);
      const ReservationCheck check = co_await backend->check_reservation(claim, waiter.ticket());
      usable = (check.lease_held || !unconfirmed()) && where_known(check.where, waiter);
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
    // Given back while this process could not renew, or moved earlier than it had heard (that
    // slot passed unused): a new place at the back of the queue.
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

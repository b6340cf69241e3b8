// acquire_all() by reserving: every claim's key at one slot (in Redis one script call per hash
// slot; in process the same steps on the models), so that each key's queue keeps its order
// (docs/waiting.md, "acquire_all(): several keys").

#include <algorithm>
#include <chrono>
#include <memory>

#include "algorithms/exact.hpp"
#include "limiter/claims.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/waiters.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::microseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

/// A time in 1/den microseconds, compared across denominators.
struct Fraction {
  std::int64_t us = 0;
  std::int64_t frac = 0;
  std::int64_t den = 1;
  friend bool operator==(const Fraction& a, const Fraction& b) noexcept {
    return a.us == b.us &&
           static_cast<Int128>(a.frac) * b.den == static_cast<Int128>(b.frac) * a.den;
  }
};

/// Gives back every claim's part of a reservation whose slot is still ahead, each under the
/// policy in force for its key (PolicyEnforcer::give_back_request(), as acquire() does). Why
/// errors are dropped: a part that cannot be given back stays taken until its slot
/// (under-admission, never over). Why copies: it may run after the caller's frame is gone, and
/// the held claims keep each limiter's backend alive.
Task<void> give_back_all(std::vector<HeldClaim> held, std::vector<DecideRequest> requests,
                         std::vector<ClaimReservation> reserved) {
  for (std::size_t i = 0; i < held.size(); ++i) {
    try {
      Backend& backend = held[i].enforcer->backend();
      const DecideRequest give_back =
          held[i].enforcer->give_back_request(requests[i], &backend, held[i].key);
      co_await backend.cancel(give_back, reserved[i].ticket);
    } catch (...) {
    }
  }
}

/// Where each claim's key took the permits of `reservation` (allowed, with no wait): its
/// ticket's slot, the time its slot's script ran, in Redis time; none in process, whose
/// decisions carry no Redis time.
std::vector<std::int64_t> claim_times(const ClaimsReservation& reservation) {
  std::vector<std::int64_t> times;
  if (reservation.decision.source != Source::redis) return times;
  for (const ClaimReservation& part : reservation.claims)
    times.push_back(part.ticket.slot.us);
  return times;
}

/// One claim's key watched for cancellation notices (from before its part of a reservation is
/// sent), and the part as a waiter whose slot the notices move (WaiterRegistry).
struct WatchedPart {
  WaiterRegistry::Waiter waiter;
  // Why after the waiter: the watch, destroyed first, unregisters it.
  std::unique_ptr<WaiterRegistry::Watch> watch;
};

/// Waits for the slot of `reservation` (allowed, with a wait), renewing its owner leases.
/// Returns the decision when the permits are the caller's; none when a key gave them back
/// (its lease lapsed) or moved them (a cancellation ahead of it: the permits were charged
/// earlier than the slot, which used now would over-admit), so that the caller reserves
/// again. The notices of such moves (`watched`, one per claim) wake it once every part's slot
/// has moved past: a dead process's backlog given back ahead of every key ends the wait then,
/// not at the slot reserved (issue 33, bug 1). A claim's policy replaced meanwhile gives every
/// part back, and none is returned. A stop request gives every part back and ends with
/// Cancelled; an error asking a key at the wake is thrown once every key was asked.
Task<std::optional<Decision>> wait_for_slot(const std::vector<HeldClaim>& held,
                                            const std::vector<DecideRequest>& requests,
                                            const ClaimsReservation& reservation,
                                            std::vector<WatchedPart>& watched,
                                            const OwnedAcquireOptions& options,
                                            Clock::time_point started) {
  PolicyEnforcer& first = *held.front().enforcer;
  // Why a guard: if the waiting task is destroyed, its reservations are still given back.
  struct GiveBackOnDestruction {
    const std::vector<HeldClaim>& held;
    const std::vector<DecideRequest>& requests;
    const ClaimsReservation& reservation;
    bool armed = true;
    ~GiveBackOnDestruction() {
      if (!armed) return;
      try {
        Task<void> give_back = give_back_all(held, requests, reservation.claims);
        // Why the client's background work: Client::close() lets the give-backs reach Redis. In
        // process they run at the loop's next turn, as acquire()'s.
        if (BackgroundTasks* tasks = held.front().enforcer->backend().background()) {
          tasks->start(std::move(give_back));
        } else {
          spawn(held.front().enforcer->loop(), std::move(give_back));
        }
      } catch (...) {
        report_error(std::current_exception());  // out of memory: given back at the slot
      }
    }
  } guard{held, requests, reservation};

  const std::size_t count = held.size();
  const auto reserved_wake = Clock::now() + std::chrono::microseconds(reservation.wait_us);
  for (std::size_t i = 0; i < count; ++i) {
    const CancelTicket& ticket = reservation.claims[i].ticket;
    WaiterRegistry::Waiter& waiter = watched[i].waiter;
    waiter.slot = ticket.slot;
    waiter.reserved_slot = ticket.slot;
    waiter.den = ticket.den;
    waiter.d = ticket.d;
    waiter.reserved_at_us = reservation.slot_us - reservation.wait_us;
    waiter.book = {
        .version = ticket.version, .cancels = ticket.cancels_before, .epoch = ticket.epoch};
    waiter.heard = ticket.cancels_before;
    waiter.wake = reserved_wake;
    watched[i].watch->add(&waiter);
  }
  // Renewed every third of the lease while a part's slot is later than the last expiry Redis
  // confirmed for it (in process nothing is registered under a lease, nothing is renewed).
  std::vector<WaitingPart> parts;
  parts.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    Backend& backend = held[i].enforcer->backend();
    parts.push_back({.enforcer = held[i].enforcer,
                     .backend = &backend,
                     .reserved = &requests[i],
                     .waits_under = requests[i].policy.get(),
                     .key = held[i].key,
                     .waiter = &watched[i].waiter});
    parts.back().renewal->confirmed = reservation.claims[i].lease_expiry_us;
  }
  const auto unconfirmed = [&](std::size_t i) { return parts[i].unconfirmed(); };
  const std::int64_t lease_us = first.backend().lease_us();
  const auto renew_every = std::chrono::microseconds(std::max<std::int64_t>(1, lease_us / 3));
  const WaitEnd end = co_await sleep_until_due(first.loop(), parts, renew_every, options);
  if (end != WaitEnd::due) {
    // Given back under the policies in force, then reserved again by the caller.
    guard.armed = false;
    co_await give_back_all(held, requests, reservation.claims);
    if (end == WaitEnd::stopped)
      throw Cancelled("acquire_all cancelled while waiting; its reservations were given back");
    co_return std::nullopt;
  }
  // Why every key is asked at the wake: a cancellation ahead of a part moves it earlier on its
  // key alone, and one whose lease lapsed is given back on its key alone; each ends its lease.
  guard.armed = false;
  // Where each part stands, if still its owner's (as reserved, or moved by cancellations ahead).
  std::vector<std::optional<FracTime>> standing(count);
  std::exception_ptr error;
  for (std::size_t i = 0; i < count; ++i) {
    try {
      const ReservationCheck check = co_await held[i].enforcer->backend().check_reservation(
          requests[i], reservation.claims[i].ticket);
      const bool stands = check.where.standing == ReservationStanding::as_reserved ||
                          check.where.standing == ReservationStanding::moved;
      if (stands && (check.lease_held || !unconfirmed(i))) standing[i] = check.where.slot;
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  // Why one slot for all: a part used later than where it stands joins whatever its key gives
  // the requests behind it, moved up as well (over-admission). Parts moved alike (the same
  // cancellations ahead on every key, a dead process's acquire_all() backlog) are used there.
  const auto at = [&](std::size_t i) {
    return Fraction{standing[i]->us, standing[i]->frac, reservation.claims[i].ticket.den};
  };
  bool one_slot = standing.front().has_value();
  for (std::size_t i = 1; i < count && one_slot; ++i)
    one_slot = standing[i] && at(i) == at(0);
  if (!one_slot) {
    // The parts that stand give back what their take, charged where it stands, still holds
    // (never more than exact), so that reserving again does not charge their keys twice.
    for (std::size_t i = 0; i < count; ++i) {
      if (!standing[i]) continue;
      try {
        co_await held[i].enforcer->backend().adjust(requests[i], Adjustment::give_back,
                                                    requests[i].permits, standing[i]->ceil_us());
      } catch (...) {
        // Not given back: taken until its slot's time has passed (under-admission, never over).
      }
    }
    co_return std::nullopt;
  }
  Decision decision = reservation.decision;
  if (decision.source == Source::redis) decision.server_time_us = standing.front()->ceil_us();
  decision.waited = since(started);
  co_return decision;
}

}  // namespace

bool reservable(std::span<const DecideRequest> requests) {
  return std::all_of(requests.begin(), requests.end(), [](const DecideRequest& request) {
    const auto& limits = request.policy->limits();
    return limits.size() == 1 && can_reserve(limits.front().limit.algorithm);
  });
}

Task<std::optional<ClaimsDecision>> reserve_and_wait(const std::vector<HeldClaim>& held,
                                                     std::span<Backend* const> backends,
                                                     const std::vector<DecideRequest>& requests,
                                                     const OwnedAcquireOptions& options,
                                                     Clock::time_point started) {
  // What is left of max_wait now (each hash slot's call gets what is left then).
  const std::function<std::int64_t()> max_wait = [&] {
    const auto waited = since(started);
    return std::min((options.max_wait - std::min(options.max_wait, waited)).count(), max_exact);
  };
  // Why before reserving: a cancellation announced before the reply arrives is kept for its
  // part. Why sized once: the registries keep pointers to the waiters.
  std::vector<WatchedPart> watched(held.size());
  for (std::size_t i = 0; i < held.size(); ++i)
    watched[i].watch = held[i].enforcer->waiters().watch_held(requests[i]);
  const ClaimsReservation reservation =
      co_await backends.front()->reserve_claims(backends, requests, max_wait);
  if (!reservation.decision.allowed || reservation.wait_us == 0) {
    ClaimsDecision decided{.decision = reservation.decision};
    decided.decision.waited = since(started);
    // Why each claim's own time: across cluster slots each slot's script ran at its own.
    if (decided.decision.allowed) decided.server_times_us = claim_times(reservation);
    co_return decided;
  }
  std::optional<Decision> admitted =
      co_await wait_for_slot(held, requests, reservation, watched, options, started);
  if (!admitted) co_return std::nullopt;  // given back or moved: a new place in the queues
  // Every part was used at one slot, where it stands: the decision's time is each claim's.
  ClaimsDecision decided{.decision = *admitted};
  co_return decided;
}

}  // namespace redlimit::detail

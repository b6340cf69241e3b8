// acquire_all() by reserving: every claim's key at one slot (in Redis one script call per hash
// slot; in process the same steps on the models), so that each key's queue keeps its order
// (docs/waiting.md, "acquire_all(): several keys").

#include <algorithm>
#include <chrono>
#include <memory>

#include "algorithms/exact.hpp"
#include "limiter/claims.hpp"
#include "limiter/lateness.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/reservation_wait.hpp"
#include "limiter/waiters.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

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

/// Waits for the slot of `reservation` (allowed, with a wait) and claims every part there
/// (claim_when_due()): the decision when the permits are the caller's; none when the caller
/// reserves again. The notices of cancellations ahead (`watched`, one per claim) move each part
/// and wake it once every part's slot has come: a dead process's backlog given back ahead of
/// every key ends the wait then, not at the slot reserved (issue 33, bug 1). An error asking a
/// key at the wake is thrown.
Task<std::optional<Decision>> wait_for_slot(const std::vector<HeldClaim>& held,
                                            const std::vector<DecideRequest>& requests,
                                            const ClaimsReservation& reservation,
                                            std::vector<WatchedPart>& watched,
                                            const OwnedAcquireOptions& options,
                                            Clock::time_point started, const Lateness& lateness,
                                            bool late) {
  const auto reserved_wake = Clock::now() + std::chrono::microseconds(reservation.wait_us);
  std::vector<WaitingPart> parts;
  parts.reserve(held.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
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
    parts.push_back({.enforcer = held[i].enforcer,
                     .backend = &held[i].enforcer->backend(),
                     .reserved = &requests[i],
                     .waits_under = requests[i].policy.get(),
                     .key = held[i].key,
                     .waiter = &waiter});
    parts.back().renewal->confirmed = reservation.claims[i].lease_expiry_us;
  }
  if (late) {
    co_await give_back_parts(parts);
    refuse_late(held);
  }
  // Renewed every third of the lease while a part's slot is later than the last expiry Redis
  // confirmed for it (in process nothing is registered under a lease, nothing is renewed).
  const PolicyEnforcer& first = *held.front().enforcer;
  const auto renew_every =
      std::chrono::microseconds(std::max<std::int64_t>(1, first.backend().lease_us() / 3));
  const WaitOutcome outcome =
      co_await claim_when_due(first.loop(), parts, renew_every, options, "acquire_all");
  if (outcome.error) std::rethrow_exception(outcome.error);
  if (!outcome.slot) co_return std::nullopt;
  Decision decision = reservation.decision;
  if (decision.source == Source::redis) {
    decision.server_time_us = outcome.slot->ceil_us();
    const std::int64_t reserved_at_us = reservation.slot_us - reservation.wait_us;
    if (lateness.too_late(decision.server_time_us - reserved_at_us)) refuse_late(held);
  }
  decision.waited = since(started);
  co_return decision;
}

}  // namespace

void refuse_late(const std::vector<HeldClaim>& held) {
  for (const HeldClaim& claim : held)
    claim.enforcer->count_late();
  throw Unavailable("the admission was answered later than AcquireOptions::max_lateness allows",
                    true);
}

bool reservable(std::span<const DecideRequest> requests) {
  return std::all_of(requests.begin(), requests.end(),
                     [](const DecideRequest& request) { return request.policy->reservable(); });
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
  const Lateness lateness(options.max_lateness);
  const ClaimsReservation reservation =
      co_await backends.front()->reserve_claims(backends, requests, max_wait);
  const bool late = reservation.decision.allowed && reservation.decision.source == Source::redis &&
                    lateness.too_late();
  if (!reservation.decision.allowed || reservation.wait_us == 0) {
    if (late) refuse_late(held);
    ClaimsDecision decided{.decision = reservation.decision};
    decided.decision.waited = since(started);
    // Why each claim's own time: across cluster slots each slot's script ran at its own.
    if (decided.decision.allowed) decided.server_times_us = claim_times(reservation);
    co_return decided;
  }
  std::optional<Decision> admitted = co_await wait_for_slot(held, requests, reservation, watched,
                                                            options, started, lateness, late);
  if (!admitted) co_return std::nullopt;  // given back or moved: a new place in the queues
  // Every part was used at one slot, where it stands: the decision's time is each claim's.
  ClaimsDecision decided{.decision = *admitted};
  co_return decided;
}

}  // namespace redlimit::detail

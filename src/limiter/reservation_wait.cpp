// The reservation waiter of acquire() and acquire_all() (docs/waiting.md): reserve every part at
// one slot, sleep on a uv timer until it, renew the owner leases beside the sleep (and ask where
// a part stands once its notices may have gone unheard), ask at the wake where each part stands;
// give every part back on a stop, on destruction, or too late.

#include "limiter/reservation_wait.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/exact.hpp"
#include "algorithms/gcra.hpp"
#include "limiter/call_observer.hpp"
#include "limiter/lateness.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/unavailability.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/outliving_call.hpp"
#include "runtime/together.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// What a waiter and the calls beside its sleep on one part share: the renewals of its owner
/// lease, and the asks of where it stands once notices may have gone unheard. Why beside the
/// waiter, not awaited by it: a call Redis does not answer would hold the waiter past its wake
/// for up to a command timeout, and the claim at the wake for one more.
struct PartUpkeep {
  std::int64_t confirmed = 0;  ///< the latest lease expiry Redis confirmed (Redis time, us)
  bool in_flight = false;      ///< a renewal
  bool reclaimed = false;      ///< Redis answered that the reservation was given back
  bool locating = false;       ///< an ask of where it stands
  std::optional<StandingOutcome> located;  ///< its answer, for the waiter to take
  std::exception_ptr error;                ///< an error that is not unavailability, for the waiter
  std::stop_source* wake = nullptr;        ///< the waiter's sleep, while it sleeps
};

/// A call on one part's key (a give-back, a renewal, an ask, a check), under the policy in force
/// when it was made. Why copied: it may run after the waiter's frame is gone.
struct PartCall {
  std::shared_ptr<PolicyEnforcer> enforcer;  ///< keeps the backend alive
  Backend* backend = nullptr;
  DecideRequest request;
  CancelTicket ticket;
};

/// One part of a reservation (one per claim): where it stands, which its key's cancellation
/// notices move, and its owner lease.
struct WaitingPart {
  std::shared_ptr<PolicyEnforcer> enforcer;  ///< its limiter's (keeps the backend alive)
  Backend* backend = nullptr;                ///< where it was reserved
  const DecideRequest* reserved = nullptr;   ///< the request it was reserved with
  /// The policy in force for the key when it was reserved (a fallback's reservation is made
  /// under another, scaled one): a change of it ends the wait.
  const CompiledPolicy* waits_under = nullptr;
  std::string_view key;  ///< the caller's key
  WaiterRegistry::Waiter waiter;
  /// Its key watched from before the reservation is sent, so that a notice in between is kept
  /// for it. Why after the waiter: destroyed first, it unregisters it.
  std::unique_ptr<WaiterRegistry::Watch> watch;
  std::shared_ptr<PartUpkeep> upkeep = std::make_shared<PartUpkeep>();
  bool stands = true;  ///< Redis has it where its waiter has it (claim_at_wake())

  /// Registered under its owner's lease (docs/waiting.md), its slot is later than the last
  /// expiry Redis confirmed. Why slot and expiry compare directly: both are Redis times; once
  /// the slot is at or before the confirmed expiry, any reclaim (after it) finds the slot due.
  bool unconfirmed() const noexcept {
    return upkeep->confirmed != 0 && waiter.slot.ceil_us() > upkeep->confirmed;
  }
  /// A call on it under the policy in force now.
  PartCall call() const {
    return {enforcer, backend, enforcer->give_back_request(*reserved, backend, key), waiter.ticket};
  }
};

/// How a waiter's sleep ended.
enum class WaitEnd {
  due,      ///< every part's slot has come
  stopped,  ///< the caller's stop was requested before that
  /// A part's policy was replaced (its slot is the old policy's), or a renewal found a part
  /// given back (its lease had lapsed): the caller reserves again.
  again,
};

/// Runs `run` when its scope ends, however it ends (the coroutine frame destroyed included).
template <class Run>
class AtScopeEnd {
 public:
  explicit AtScopeEnd(Run run) : run_(std::move(run)) {}
  AtScopeEnd(const AtScopeEnd&) = delete;
  AtScopeEnd& operator=(const AtScopeEnd&) = delete;
  ~AtScopeEnd() { run_(); }

 private:
  Run run_;
};

/// Renews a part's owner lease, reporting into its upkeep.
Task<void> renew_beside(PartCall part, std::shared_ptr<PartUpkeep> upkeep) {
  try {
    const ReservationReply renewed = co_await part.backend->run_reservation(
        ReservationOperation::renew, std::move(part.request), part.ticket);
    if (renewed.lease_expiry_us == 0) upkeep->reclaimed = true;
    upkeep->confirmed = std::max(upkeep->confirmed, renewed.lease_expiry_us);
  } catch (...) {
    // Redis could not answer: renewed again at the next turn, or claimed at the wake.
    if (!means_unavailable(std::current_exception())) upkeep->error = std::current_exception();
  }
  upkeep->in_flight = false;
  if (upkeep->wake != nullptr) upkeep->wake->request_stop();  // the waiter looks again
}

/// Asks where a part stands while its waiter sleeps, reporting into its upkeep. Why every error
/// is dropped: the ask at the wake finds where it stands, or reports the error.
Task<void> locate_beside(PartCall part, std::shared_ptr<PartUpkeep> upkeep) {
  try {
    const ReservationReply located = co_await part.backend->run_reservation(
        ReservationOperation::locate, std::move(part.request), part.ticket);
    upkeep->located = located.where;
    if (located.where.standing == ReservationStanding::given_back) upkeep->reclaimed = true;
  } catch (...) {
  }
  upkeep->locating = false;
  if (upkeep->wake != nullptr) upkeep->wake->request_stop();
}

/// Points every part's wake-ups (notices, renewals, asks) at `wake_early`, or at nothing.
void point_wakes(std::span<WaitingPart> parts, std::stop_source* wake_early) noexcept {
  for (WaitingPart& part : parts) {
    part.waiter.reschedule = wake_early;
    part.upkeep->wake = wake_early;
  }
}

/// True if Redis has the part where its waiter has it: not given back, and moved by no
/// cancellation the waiter did not hear of (moved as WaiterRegistry moves it).
bool where_known(const StandingOutcome& where, const WaiterRegistry::Waiter& waiter) {
  if (where.standing == ReservationStanding::as_reserved) return true;
  if (where.standing != ReservationStanding::moved) return false;  // given back, or unknown
  const FracTime at =
      where.slot.us < waiter.reserved_at_us ? FracTime{waiter.reserved_at_us, 0} : where.slot;
  return at == waiter.slot;
}

/// Whether two parts' slots are one time (each a fraction in 1/den of its own).
bool same_time(const WaiterRegistry::Waiter& a, const WaiterRegistry::Waiter& b) noexcept {
  return a.slot.us == b.slot.us && static_cast<Int128>(a.slot.frac) * b.ticket.den ==
                                       static_cast<Int128>(b.slot.frac) * a.ticket.den;
}

std::vector<PartCall> give_backs_of(std::span<const WaitingPart> parts) {
  std::vector<PartCall> out;
  for (const WaitingPart& part : parts)
    out.push_back(part.call());
  return out;
}

Task<void> cancel_part(const PartCall* part, std::optional<CancelVerdict>* verdict) {
  try {
    const ReservationReply cancelled = co_await part->backend->run_reservation(
        ReservationOperation::cancel, part->request, part->ticket);
    *verdict = cancelled.verdict;
  } catch (...) {
  }
}

/// Cancels every part at once: each one's verdict, none where Redis did not answer. Why errors
/// are dropped: a part that cannot be given back stays taken until its slot (under-admission,
/// never over).
Task<std::vector<std::optional<CancelVerdict>>> cancel_all(std::vector<PartCall> parts) {
  std::vector<std::optional<CancelVerdict>> verdicts(parts.size());
  std::vector<Task<void>> calls;
  for (std::size_t i = 0; i < parts.size(); ++i)
    calls.push_back(cancel_part(&parts[i], &verdicts[i]));
  co_await Together(std::move(calls));
  co_return verdicts;
}

Task<void> give_back_all(std::vector<PartCall> parts) {
  static_cast<void>(co_await cancel_all(std::move(parts)));
}

/// Gives every part back: the waiter's task was destroyed while it slept.
void give_back_abandoned(uv_loop_t* loop, std::span<const WaitingPart> parts) noexcept {
  try {
    Task<void> give_back = give_back_all(give_backs_of(parts));
    // Why the client's background work: Client::close() lets the give-backs reach Redis
    // first. In process they run at the loop's next turn.
    if (BackgroundTasks* tasks = parts.front().backend->background()) {
      tasks->start(std::move(give_back));
    } else {
      spawn(loop, std::move(give_back));
    }
  } catch (...) {
    report_error(std::current_exception());  // out of memory: given back at the slots
  }
}

/// Asks Redis whether `part` stands where its waiter has it: on Redis the notices may come late.
/// In process they come as the cancellation is made, and nothing is asked.
Task<void> check_part(WaitingPart* part) {
  if (part->backend->background() == nullptr) co_return;
  const PartCall call = part->call();
  const ReservationReply check = co_await call.backend->run_reservation(
      ReservationOperation::confirm, call.request, call.ticket);
  part->stands =
      (check.lease_held || !part->unconfirmed()) && where_known(check.where, part->waiter);
}

/// The wake: the slot where every part stands as its waiter has it, else what the parts that
/// stand still hold given back, and no slot. Throws the first error that kept Redis from
/// answering where a part stands (nothing given back).
Task<std::optional<FracTime>> claim_at_wake(std::span<WaitingPart> parts) {
  std::vector<Task<void>> checks;
  for (WaitingPart& part : parts)
    checks.push_back(check_part(&part));
  co_await Together(std::move(checks));
  const WaiterRegistry::Waiter& first = parts.front().waiter;
  if (std::all_of(parts.begin(), parts.end(), [&first](const WaitingPart& part) {
        return part.stands && same_time(part.waiter, first);
      })) {
    co_return first.slot;
  }
  // Why given back: a part used later than where it stands joins whatever its key gives the
  // requests behind it, moved up as well (over-admission); given back, reserving again does
  // not charge its key twice. What the take of a part that stands, charged there, still holds
  // goes back (never more than exact).
  std::vector<Task<void>> give_backs;
  for (const WaitingPart& part : parts) {
    if (!part.stands) continue;
    give_backs.push_back(give_back_claims(
        *part.backend, {give_back_op(*part.reserved, std::nullopt, part.waiter.slot.ceil_us())}));
  }
  co_await Together(std::move(give_backs));
  co_return std::nullopt;
}

/// A stop before the wake: every part given back. Cancelled, unless Redis found every slot
/// already come where the waiter has it (the permits were used and are the caller's: their
/// slot).
Task<std::optional<FracTime>> cancel_before_wake(std::span<WaitingPart> parts,
                                                 std::string_view call) {
  const std::vector<std::optional<CancelVerdict>> verdicts =
      co_await cancel_all(give_backs_of(parts));
  const auto any = [&verdicts](std::optional<CancelVerdict> verdict) {
    return std::find(verdicts.begin(), verdicts.end(), verdict) != verdicts.end();
  };
  const std::string cancelled = std::string(call) + " cancelled while waiting; ";
  if (any(std::nullopt))
    throw Cancelled(cancelled + "Redis did not answer whether its reservation was given back");
  if (any(CancelVerdict::returned) || any(CancelVerdict::already_returned))
    throw Cancelled(cancelled + "its reservation was given back");
  if (any(CancelVerdict::refused))
    throw Cancelled(cancelled + "the key was reset since its reservation");
  if (std::any_of(parts.begin(), parts.end(),
                  [](const WaitingPart& part) { return part.unconfirmed(); })) {
    // Due, but a lease may have lapsed and its permits gone back: not the caller's.
    throw Cancelled(cancelled +
                    "its reservation's lease had lapsed, and it may have been given back");
  }
  // Why asked: due before the waiter's wake, a slot may have come early because a cancellation
  // moved it, unheard; used at the slot the waiter believes, its permits would join the
  // waiters behind, moved up to that very slot.
  std::optional<FracTime> slot;
  try {
    slot = co_await claim_at_wake(parts);
  } catch (...) {
    throw Cancelled(cancelled + "its slot had come, and Redis did not answer where it stood");
  }
  if (!slot) {
    throw Cancelled(cancelled + "its slot had come, moved earlier than it knew, and passed unused");
  }
  co_return slot;
}

/// The one sleep of a reservation waiter: on a uv timer until the latest part's wake (notices
/// move them, and wake it to sleep the shorter time), renewing every part whose slot is not
/// confirmed every `renew_every` beside the sleep, and asking where each part stands once its
/// notices may have gone unheard. Rethrows a renewal's error that is not unavailability.
Task<WaitEnd> sleep_until_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                              std::chrono::microseconds renew_every,
                              const OwnedAcquireOptions& options) {
  const auto renewable = [](const WaitingPart& part) {
    return part.unconfirmed() && !part.upkeep->in_flight;
  };
  auto next_renewal = Clock::now() + renew_every;
  for (;;) {
    for (WaitingPart& part : parts) {
      if (part.upkeep->error) std::rethrow_exception(part.upkeep->error);
      if (part.upkeep->reclaimed) co_return WaitEnd::again;
      if (const auto where = std::exchange(part.upkeep->located, std::nullopt))
        part.watch->locate(*where);
    }
    const auto current = Clock::now();
    auto wake = parts.front().waiter.wake;
    for (const WaitingPart& part : parts)
      wake = std::max(wake, part.waiter.wake);
    if (current >= wake) co_return WaitEnd::due;
    // Why before the slot: a change reaches the waiters (the slot is the old policy's).
    if (!options.stop.stop_requested() &&
        std::any_of(parts.begin(), parts.end(), [](const WaitingPart& part) {
          return part.enforcer->superseded(*part.waits_under, part.key);
        })) {
      co_return WaitEnd::again;
    }
    for (WaitingPart& part : parts) {
      if (!part.waiter.unheard || part.upkeep->locating) continue;
      part.waiter.unheard = false;
      // Why the client's upkeep: as for the renewals below. In process every notice is heard as
      // the cancellation is made, and nothing is asked.
      BackgroundTasks* const tasks = part.backend->background();
      if (tasks == nullptr) continue;
      part.upkeep->locating = true;
      tasks->start_upkeep(locate_beside(part.call(), part.upkeep));
    }
    const bool renewing = std::any_of(parts.begin(), parts.end(), renewable);
    if (renewing && current >= next_renewal) {
      next_renewal = current + renew_every;
      for (WaitingPart& part : parts) {
        if (!renewable(part)) continue;
        part.upkeep->in_flight = true;
        // Why the client's upkeep, not work for the caller: Client::close() waits for that
        // first, and waiters renewing one after another would hold it for as long as they
        // wait. A renewal the client no longer sends is made good by the check at the wake.
        // Only a part registered in Redis is renewed, so its backend has a client.
        part.backend->background()->start_upkeep(renew_beside(part.call(), part.upkeep));
      }
      continue;
    }
    const auto until = renewing ? std::min(wake, next_renewal) : wake;
    std::stop_source wake_early;
    point_wakes(parts, &wake_early);
    // Why pointed away at every exit: a notice or a call beside that ends after the sleep (or
    // after the waiter's frame is gone) must not wake it.
    const AtScopeEnd unpoint{[parts] { point_wakes(parts, nullptr); }};
    std::stop_callback<ForwardStop> forward(options.stop, ForwardStop{&wake_early});
    bool woken = false;
    try {
      co_await sleep_for(loop, std::chrono::ceil<std::chrono::microseconds>(until - current),
                         wake_early.get_token());
    } catch (const Cancelled&) {
      woken = true;
    }
    if (woken && options.stop.stop_requested()) co_return WaitEnd::stopped;
  }
}

/// A reservation of one claim (the reserve script's single-key form) as one of several.
ClaimsReservation one_part(const Reservation& made) {
  ClaimsReservation out{.decision = made.decision,
                        .wait_us = made.wait_us,
                        .slot_us = made.reserved_at_us + made.wait_us};
  if (made.decision.allowed)
    out.claims.push_back({.ticket = ticket_of(made), .lease_expiry_us = made.lease_expiry_us});
  return out;
}

/// Reserves the requests (`held`'s, whose enforcers keep the backends alive): one with the
/// reserve script's single-key form, several at one slot (Backend::reserve_claims()). Why one
/// alone is not reserve_claims(): that form decides every claim three times to agree on a
/// slot, and its slot is a whole microsecond. Why copies: the call may outlive its caller.
Task<ClaimsReservation> reserve_parts(std::vector<HeldClaim> held,
                                      std::vector<DecideRequest> requests,
                                      std::function<std::int64_t()> max_wait_us) {
  if (requests.size() == 1) {
    const Reservation made =
        co_await held.front().enforcer->backend().reserve(requests.front(), max_wait_us());
    co_return one_part(made);
  }
  std::vector<Backend*> backends;
  for (const HeldClaim& claim : held)
    backends.push_back(&claim.enforcer->backend());
  co_return co_await backends.front()->reserve_claims(backends, requests, std::move(max_wait_us));
}

/// Gives back `made`, reserved for `held` with `requests` by a waiter destroyed before its reply
/// arrived, under the policies in force then (one admitted at once stays taken, as a decision's
/// permits: nobody to give them to). Why nothing on an error: a reservation that may have run
/// unheard has no ticket to give it back with (as for a waiter still there).
Task<void> give_back_orphan(std::vector<HeldClaim> held, std::vector<DecideRequest> requests,
                            std::optional<ClaimsReservation> made, std::exception_ptr) {
  if (!made || !made->decision.allowed || made->wait_us == 0) co_return;
  std::vector<PartCall> parts;
  for (std::size_t i = 0; i < held.size(); ++i) {
    Backend* backend = &held[i].enforcer->backend();
    parts.push_back({held[i].enforcer, backend,
                     held[i].enforcer->give_back_request(requests[i], backend, held[i].key),
                     made->claims[i].ticket});
  }
  co_await give_back_all(std::move(parts));
}

}  // namespace

void refuse_late(std::span<const HeldClaim> held) {
  for (const HeldClaim& claim : held)
    claim.enforcer->count_late();
  throw Unavailable("the admission was answered later than AcquireOptions::max_lateness allows",
                    true);
}

Task<std::optional<ClaimsDecision>> reserve_and_wait(std::span<const HeldClaim> held,
                                                     std::span<const DecideRequest> requests,
                                                     const OwnedAcquireOptions& options,
                                                     Clock::time_point started) {
  PolicyEnforcer& first = *held.front().enforcer;
  const std::string_view call = held.size() == 1 ? "acquire" : "acquire_all";  // in errors
  // Why before the turn: a follower's request was confirmed with the server at this contact.
  const std::uint64_t contact = first.contact();
  co_await first.turn().yield_if_due();
  // Why watched before reserving: a cancellation announced before the reply arrives is kept
  // for its part. Why sized once: the registries keep pointers to the waiters.
  std::vector<WaitingPart> parts(held.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
    WaitingPart& part = parts[i];
    part.enforcer = held[i].enforcer;
    part.backend = &part.enforcer->backend();
    part.reserved = &requests[i];
    part.waits_under = requests[i].policy.get();
    part.key = held[i].key;
    part.watch = part.enforcer->waiters().watch(requests[i]);
  }
  // What is left of max_wait when asked (each hash slot's call gets what is left then).
  std::function<std::int64_t()> max_wait = [max_wait = options.max_wait, started] {
    return std::min((max_wait - std::min(max_wait, since(started))).count(), max_exact);
  };
  const Lateness lateness(options.max_lateness);
  std::optional<ClaimsReservation> reservation;
  std::optional<DecideRequest> fallback;
  try {
    std::vector<HeldClaim> claims(held.begin(), held.end());
    std::vector<DecideRequest> copies(requests.begin(), requests.end());
    if (BackgroundTasks* tasks = first.backend().background()) {
      // Why outliving: a caller destroyed before the reply leaves a reservation nobody waits
      // on; it is given back when the reply comes (issue 33, bug 8).
      Orphaned<ClaimsReservation> orphaned = std::bind_front(give_back_orphan, claims, copies);
      reservation = co_await outliving(
          *tasks, reserve_parts(std::move(claims), std::move(copies), max_wait), orphaned);
    } else {
      reservation = co_await reserve_parts(std::move(claims), std::move(copies), max_wait);
    }
  } catch (...) {
    // One claim whose reservation Redis could not answer waits on its local fallback, if it has
    // one that can grant it (the notices come from Redis: it waits its time as reserved).
    if (!means_unavailable(std::current_exception()) || held.size() != 1) throw;
    fallback = first.on_fallback(requests.front());
    if (!fallback) throw;
  }
  if (fallback) {
    parts.front().backend = first.fallback();
    parts.front().reserved = &*fallback;
    reservation = one_part(first.fallback()->reserve_now(*fallback, max_wait()));
    reservation->decision.source = Source::fallback;
  }

  const Decision& decision = reservation->decision;
  const std::int64_t reserved_at_us = reservation->slot_us - reservation->wait_us;
  if (!decision.allowed && decision.retry_after <= options.max_wait - since(started) &&
      decision.retry_after.count() > longest_reservation_wait_us(reserved_at_us)) {
    throw InvalidArgument(std::string(call) + "(): the wait of " +
                          std::to_string(decision.retry_after.count()) +
                          " us reaches past 2^52 us since the epoch (the year 2112), the latest "
                          "slot a reservation keeps exact");
  }
  // A follower's reservation made on a server reached after the contact broke (a retry after a
  // failover) may be under a version that server lost: it is given back (below) and made again
  // once the policy is read again.
  const bool crossed = !fallback && contact != first.contact() &&
                       std::any_of(held.begin(), held.end(), [](const HeldClaim& claim) {
                         return claim.enforcer->follows();
                       });
  // Answered too late to be used in time (AcquireOptions::max_lateness): given back, if its
  // slot is still ahead, and refused.
  const bool late = decision.allowed && decision.source == Source::redis && lateness.too_late();
  if (!decision.allowed || (reservation->wait_us == 0 && !crossed)) {
    if (late) refuse_late(held);
    ClaimsDecision decided{.decision = decision};
    // Why each claim's own time (its ticket's slot): across cluster slots each slot's script
    // ran at its own. In process decisions carry no Redis time.
    for (const ClaimReservation& part : reservation->claims) {
      if (decision.source == Source::redis) decided.server_times_us.push_back(part.ticket.slot.us);
    }
    co_return decided;
  }
  const auto reserved_wake = Clock::now() + std::chrono::microseconds(reservation->wait_us);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const CancelTicket& ticket = reservation->claims[i].ticket;
    parts[i].waiter = {.slot = ticket.slot,
                       .ticket = ticket,
                       .reserved_at_us = reserved_at_us,
                       .heard = ticket.cancels_before,
                       .wake = reserved_wake};
    if (!fallback) parts[i].watch->add(&parts[i].waiter);
    parts[i].upkeep->confirmed = reservation->claims[i].lease_expiry_us;
  }
  if (crossed || late) {
    co_await give_back_all(give_backs_of(parts));
    if (late) refuse_late(held);
    co_return std::nullopt;
  }

  // Renewed every third of the lease while a part's slot is later than the last expiry Redis
  // confirmed for it (in process nothing is registered under a lease, nothing is renewed).
  const auto renew_every =
      std::chrono::microseconds(std::max<std::int64_t>(1, first.backend().lease_us() / 3));
  std::optional<FracTime> slot;
  {
    const GaugeScope waiting(first.waiters_gauge(), options.slept);
    // Gives every part back if the task is destroyed while it sleeps (or the sleep throws).
    bool sleeping = true;
    const AtScopeEnd give_back_if_abandoned{[&sleeping, &parts, loop = first.loop()] {
      if (sleeping) give_back_abandoned(loop, parts);
    }};
    const WaitEnd end = co_await sleep_until_due(first.loop(), parts, renew_every, options);
    sleeping = false;
    if (end == WaitEnd::due) {
      slot = co_await claim_at_wake(parts);
    } else if (end == WaitEnd::stopped) {
      slot = co_await cancel_before_wake(parts, call);
    } else {
      // Given back under the policies in force, then reserved again.
      co_await give_back_all(give_backs_of(parts));
    }
  }
  if (!slot) co_return std::nullopt;
  ClaimsDecision decided{.decision = decision};
  if (decision.source == Source::redis) {
    decided.decision.server_time_us = slot->ceil_us();
    if (lateness.too_late(decided.decision.server_time_us - reserved_at_us)) refuse_late(held);
  }
  co_return decided;
}
}  // namespace redlimit::detail

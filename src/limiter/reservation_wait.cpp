#include "limiter/reservation_wait.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "algorithms/exact.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/unavailability.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/together.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Renews `part`'s owner lease, reporting into its renewal; the enforcer keeps the backend
/// alive until it ends.
Task<void> renew_beside(std::shared_ptr<PolicyEnforcer> enforcer, Backend* backend,
                        DecideRequest request, std::int64_t version,
                        std::shared_ptr<LeaseRenewal> renewal) {
  (void)enforcer;
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

struct ForwardStop {
  std::stop_source* target;
  void operator()() const noexcept { target->request_stop(); }
};

/// Points every part's wake-ups at `wake_early` for a scope. Why: a notice or a renewal that
/// ends after the sleep (or after the waiter's frame is gone) must not wake it.
class WakeEarly {
 public:
  WakeEarly(std::span<WaitingPart> parts, std::stop_source* wake_early) : parts_(parts) {
    for (WaitingPart& part : parts_) {
      part.waiter->reschedule = wake_early;
      part.renewal->wake = wake_early;
    }
  }
  WakeEarly(const WakeEarly&) = delete;
  WakeEarly& operator=(const WakeEarly&) = delete;
  ~WakeEarly() {
    for (WaitingPart& part : parts_) {
      part.waiter->reschedule = nullptr;
      part.renewal->wake = nullptr;
    }
  }

 private:
  std::span<WaitingPart> parts_;
};

/// True if Redis has the part where its waiter has it: not given back, and moved by no
/// cancellation the waiter did not hear of (moved as WaiterRegistry moves it).
bool where_known(const StandingOutcome& where, const WaiterRegistry::Waiter& waiter) {
  switch (where.standing) {
    case ReservationStanding::as_reserved:
      return true;
    case ReservationStanding::moved: {
      const FracTime at =
          where.slot.us < waiter.reserved_at_us ? FracTime{waiter.reserved_at_us, 0} : where.slot;
      return at == waiter.slot;
    }
    case ReservationStanding::given_back:
    case ReservationStanding::unknown:
      return false;
  }
  return false;
}

/// Whether two parts' slots are one time (each a fraction in 1/den of its own).
bool same_time(const WaiterRegistry::Waiter& a, const WaiterRegistry::Waiter& b) noexcept {
  return a.slot.us == b.slot.us &&
         static_cast<Int128>(a.slot.frac) * b.den == static_cast<Int128>(b.slot.frac) * a.den;
}

/// What gives one part back. Why copied: it may run after the waiter's frame is gone.
struct PartGiveBack {
  std::shared_ptr<PolicyEnforcer> enforcer;  ///< keeps the backend alive
  Backend* backend = nullptr;
  DecideRequest request;
  CancelTicket ticket;
};

std::vector<PartGiveBack> give_backs_of(std::span<const WaitingPart> parts) {
  std::vector<PartGiveBack> out;
  out.reserve(parts.size());
  for (const WaitingPart& part : parts) {
    out.push_back({part.enforcer, part.backend,
                   part.enforcer->give_back_request(*part.reserved, part.backend, part.key),
                   part.waiter->ticket()});
  }
  return out;
}

Task<void> cancel_part(const PartGiveBack* part, std::optional<CancelVerdict>* verdict) {
  try {
    *verdict = co_await part->backend->cancel(part->request, part->ticket);
  } catch (...) {
  }
}

/// Cancels every part at once: each one's verdict, none where Redis did not answer. Why errors
/// are dropped: a part that cannot be given back stays taken until its slot (under-admission,
/// never over).
Task<std::vector<std::optional<CancelVerdict>>> cancel_all(std::vector<PartGiveBack> parts) {
  std::vector<std::optional<CancelVerdict>> verdicts(parts.size());
  std::vector<Task<void>> calls;
  calls.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i)
    calls.push_back(cancel_part(&parts[i], &verdicts[i]));
  co_await Together(std::move(calls));
  co_return verdicts;
}

Task<void> give_back_all(std::vector<PartGiveBack> parts) {
  static_cast<void>(co_await cancel_all(std::move(parts)));
}

/// Gives every part back if the waiter's task is destroyed while it sleeps.
class GiveBackOnDestruction {
 public:
  GiveBackOnDestruction(uv_loop_t* loop, std::span<const WaitingPart> parts)
      : loop_(loop), parts_(parts) {}
  GiveBackOnDestruction(const GiveBackOnDestruction&) = delete;
  GiveBackOnDestruction& operator=(const GiveBackOnDestruction&) = delete;
  ~GiveBackOnDestruction() {
    if (!armed_) return;
    try {
      Task<void> give_back = give_back_all(give_backs_of(parts_));
      // Why the client's background work: Client::close() lets the give-backs reach Redis
      // first. In process they run at the loop's next turn.
      if (BackgroundTasks* tasks = parts_.front().backend->background()) {
        tasks->start(std::move(give_back));
      } else {
        spawn(loop_, std::move(give_back));
      }
    } catch (...) {
      report_error(std::current_exception());  // out of memory: given back at the slots
    }
  }
  void disarm() noexcept { armed_ = false; }

 private:
  uv_loop_t* loop_;
  std::span<const WaitingPart> parts_;
  bool armed_ = true;
};

/// Whether `part` stands where its waiter has it (one not asked at the wake does); an error
/// that kept Redis from answering goes to `error` (the first one).
Task<void> check_part(const WaitingPart* part, bool* stands, std::exception_ptr* error) {
  if (!part->asked_at_wake()) co_return;
  try {
    const DecideRequest claim =
        part->enforcer->give_back_request(*part->reserved, part->backend, part->key);
    const ReservationCheck check =
        co_await part->backend->check_reservation(claim, part->waiter->ticket());
    *stands = (check.lease_held || !part->unconfirmed()) && where_known(check.where, *part->waiter);
  } catch (...) {
    if (!*error) *error = std::current_exception();
  }
}

/// Gives back what the take of `part`, charged where it stands, still holds (never more than
/// exact). Why errors are dropped: not given back, it stays taken until its slot's time has
/// passed (under-admission, never over).
Task<void> give_back_take(const WaitingPart* part) {
  try {
    co_await part->backend->adjust(*part->reserved, Adjustment::give_back, part->reserved->permits,
                                   part->waiter->slot.ceil_us());
  } catch (...) {
  }
}

/// The wake: the slot where every part stands as its waiter has it, else what the parts that
/// stand still hold given back, and no slot.
Task<WaitOutcome> claim_at_wake(std::span<WaitingPart> parts) {
  // Why a struct: a std::vector<bool> has no element to point at.
  struct Standing {
    bool stands = true;
  };
  std::vector<Standing> standing(parts.size());
  WaitOutcome outcome;
  std::vector<Task<void>> checks;
  checks.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i)
    checks.push_back(check_part(&parts[i], &standing[i].stands, &outcome.error));
  co_await Together(std::move(checks));
  if (outcome.error) co_return outcome;
  bool one_slot = standing.front().stands;
  for (std::size_t i = 1; i < parts.size() && one_slot; ++i)
    one_slot = standing[i].stands && same_time(*parts[i].waiter, *parts.front().waiter);
  if (one_slot) {
    outcome.slot = parts.front().waiter->slot;
    co_return outcome;
  }
  // Why given back: a part used later than where it stands joins whatever its key gives the
  // requests behind it, moved up as well (over-admission); given back, reserving again does
  // not charge its key twice.
  std::vector<Task<void>> give_backs;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (standing[i].stands) give_backs.push_back(give_back_take(&parts[i]));
  }
  co_await Together(std::move(give_backs));
  co_return outcome;
}

/// A stop before the wake: every part given back. Cancelled, unless Redis found every slot
/// already come where the waiter has it (the permits were used and are the caller's: their
/// slot).
Task<WaitOutcome> cancel_before_wake(std::span<WaitingPart> parts, std::string_view call) {
  const std::vector<std::optional<CancelVerdict>> verdicts =
      co_await cancel_all(give_backs_of(parts));
  bool unanswered = false;
  bool refused = false;
  bool returned = false;
  for (const std::optional<CancelVerdict>& verdict : verdicts) {
    unanswered = unanswered || !verdict;
    refused = refused || verdict == CancelVerdict::refused;
    returned = returned || verdict == CancelVerdict::returned ||
               verdict == CancelVerdict::already_returned;
  }
  const std::string cancelled = std::string(call) + " cancelled while waiting; ";
  if (unanswered)
    throw Cancelled(cancelled + "Redis did not answer whether its reservation was given back");
  if (returned) throw Cancelled(cancelled + "its reservation was given back");
  if (refused) throw Cancelled(cancelled + "the key was reset since its reservation");
  if (std::any_of(parts.begin(), parts.end(),
                  [](const WaitingPart& part) { return part.unconfirmed(); })) {
    // Due, but a lease may have lapsed and its permits gone back: not the caller's.
    throw Cancelled(cancelled +
                    "its reservation's lease had lapsed, and it may have been given back");
  }
  // Why asked: due before the waiter's wake, a slot may have come early because a cancellation
  // ahead moved it, unheard; used at the slot the waiter believes, its permits would join the
  // waiters behind, moved up to that very slot.
  const WaitOutcome where = co_await claim_at_wake(parts);
  if (where.error) {
    throw Cancelled(cancelled + "its slot had come, and Redis did not answer where it stood");
  }
  if (!where.slot) {
    throw Cancelled(cancelled + "its slot had come, moved earlier than it knew, and passed unused");
  }
  co_return where;
}

}  // namespace

Task<WaitEnd> sleep_until_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                              std::chrono::microseconds renew_every,
                              const OwnedAcquireOptions& options) {
  auto next_renewal = Clock::now() + renew_every;
  for (;;) {
    for (const WaitingPart& part : parts) {
      if (part.renewal->error) std::rethrow_exception(part.renewal->error);
      if (part.renewal->reclaimed) co_return WaitEnd::reclaimed;
    }
    const auto current = Clock::now();
    auto wake = parts.front().waiter->wake;
    for (const WaitingPart& part : parts)
      wake = std::max(wake, part.waiter->wake);
    if (current >= wake) co_return WaitEnd::due;
    // Why before the slot: a change reaches the waiters (the slot is the old policy's).
    if (!options.stop.stop_requested() &&
        std::any_of(parts.begin(), parts.end(), [](const WaitingPart& part) {
          return part.enforcer->superseded(*part.waits_under, part.key);
        })) {
      co_return WaitEnd::superseded;
    }
    bool renewing = false;
    for (const WaitingPart& part : parts)
      renewing = renewing || (part.unconfirmed() && !part.renewal->in_flight);
    if (renewing && current >= next_renewal) {
      next_renewal = current + renew_every;
      for (WaitingPart& part : parts) {
        if (!part.unconfirmed() || part.renewal->in_flight) continue;
        part.renewal->in_flight = true;
        // Why the client's upkeep, not work for the caller: Client::close() waits for that
        // first, and waiters renewing one after another would hold it for as long as they
        // wait. A renewal the client no longer sends is made good by the check at the wake.
        // Only a part registered in Redis is renewed, so its backend has a client.
        part.backend->background()->start_upkeep(
            renew_beside(part.enforcer, part.backend,
                         part.enforcer->give_back_request(*part.reserved, part.backend, part.key),
                         part.waiter->book.version, part.renewal));
      }
      continue;
    }
    const auto until = renewing ? std::min(wake, next_renewal) : wake;
    std::stop_source wake_early;
    const WakeEarly pointed(parts, &wake_early);
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

Task<void> give_back_parts(std::span<const WaitingPart> parts) {
  co_await give_back_all(give_backs_of(parts));
}

Task<WaitOutcome> claim_when_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                                 std::chrono::microseconds renew_every,
                                 const OwnedAcquireOptions& options, std::string_view call) {
  GiveBackOnDestruction guard(loop, parts);
  const WaitEnd end = co_await sleep_until_due(loop, parts, renew_every, options);
  guard.disarm();
  switch (end) {
    case WaitEnd::due:
      co_return co_await claim_at_wake(parts);
    case WaitEnd::stopped:
      co_return co_await cancel_before_wake(parts, call);
    case WaitEnd::superseded:
    case WaitEnd::reclaimed:
      break;
  }
  // Given back under the policies in force, then reserved again by the caller.
  co_await give_back_parts(parts);
  co_return WaitOutcome{};
}

}  // namespace redlimit::detail

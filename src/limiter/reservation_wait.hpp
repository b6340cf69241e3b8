#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string_view>

#include "limiter/backend.hpp"
#include "limiter/owned_acquire_options.hpp"
#include "limiter/waiters.hpp"

namespace redlimit::detail {

class PolicyEnforcer;

/// What a waiter and the renewal of one part's owner lease share. Why beside the waiter, not
/// awaited by it: a renewal Redis does not answer would hold the waiter past its wake for up to
/// a command timeout, and the claim at the wake for one more.
struct LeaseRenewal {
  std::int64_t confirmed = 0;  ///< the latest lease expiry Redis confirmed (Redis time, us)
  bool in_flight = false;
  bool reclaimed = false;            ///< Redis answered that the reservation was given back
  std::exception_ptr error;          ///< an error that is not unavailability, for the waiter
  std::stop_source* wake = nullptr;  ///< the waiter's sleep, while it sleeps
};

/// One part of a reservation a waiter sleeps on (acquire(): its only one; acquire_all(): one
/// per claim): where it stands, which its key's cancellation notices move, and its owner lease.
/// On Redis (a backend with background work) the notices may come late, so the part is asked
/// for at the wake (claim_when_due()); in process they come as the cancellation is made.
struct WaitingPart {
  std::shared_ptr<PolicyEnforcer> enforcer;  ///< its limiter's (keeps the backend alive)
  Backend* backend = nullptr;                ///< where it was reserved
  const DecideRequest* reserved = nullptr;   ///< the request it was reserved with
  /// The policy in force for the key when it was reserved (a fallback's reservation is made
  /// under another, scaled one): a change of it ends the wait.
  const CompiledPolicy* waits_under = nullptr;
  std::string_view key;  ///< the caller's key
  WaiterRegistry::Waiter* waiter = nullptr;
  std::shared_ptr<LeaseRenewal> renewal = std::make_shared<LeaseRenewal>();
  /// Registered under its owner's lease (docs/waiting.md), its slot is later than the last
  /// expiry Redis confirmed. Why slot and expiry compare directly: both are Redis times; once
  /// the slot is at or before the confirmed expiry, any reclaim (after it) finds the slot due.
  bool unconfirmed() const noexcept {
    return renewal->confirmed != 0 && waiter->slot.ceil_us() > renewal->confirmed;
  }
  /// Whether Redis is asked where the part stands at the wake.
  bool asked_at_wake() const noexcept { return backend->background() != nullptr; }
};

/// How a waiter's sleep ended.
enum class WaitEnd {
  due,         ///< every part's slot has come
  stopped,     ///< the caller's stop was requested before that
  superseded,  ///< a part's policy was replaced (its slot is the old policy's)
  reclaimed,   ///< a renewal found a part given back (its lease had lapsed)
};

/// The one sleep of a reservation waiter: on a uv timer until the latest part's wake (notices
/// move them, and wake it to sleep the shorter time), renewing every part whose slot is not
/// confirmed every `renew_every` beside the sleep. Rethrows a renewal's error that is not
/// unavailability. `parts` stay valid until it ends.
Task<WaitEnd> sleep_until_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                              std::chrono::microseconds renew_every,
                              const OwnedAcquireOptions& options);

/// Gives every part whose slot is still ahead back, each under the policy in force for its key
/// (PolicyEnforcer::give_back_request()). Why errors are dropped: a part that cannot be given
/// back stays taken until its slot (under-admission, never over).
Task<void> give_back_parts(std::span<const WaitingPart> parts);

/// The wait of a reservation over `parts` (reserved at one slot), to its end (docs/waiting.md):
/// sleeps until every part's slot has come (sleep_until_due()), then makes sure each part is
/// still the caller's where its waiter has it: one asked at the wake (on Redis) must stand where
/// the notices it heard put it (a cancellation's notice may still be on its way) and, registered
/// under its owner's lease past the last expiry confirmed, be still held. Its slot: where every
/// part is used. No slot when the caller reserves again: a part's policy was replaced, a part
/// was given back or moved elsewhere than its waiter has it (its slot passed unused), or the
/// parts stand at several slots; every part that still holds permits gave them back first. A
/// stop before the wake gives every part back and throws Cancelled, unless Redis finds every
/// slot already come (the permits were used: the slot is returned). An error that kept Redis from
/// answering at the wake is returned, for the caller's failure policy; a renewal's error that is
/// not unavailability is thrown. If the task is destroyed, every part is given back in the
/// background. `call` names the caller in Cancelled's message. `parts` stay valid until it
/// ends.
/// How a reservation's wait ended (claim_when_due()).
struct WaitOutcome {
  std::optional<FracTime> slot;  ///< admitted: where every part is used
  std::exception_ptr error;      ///< what kept Redis from answering at the wake
};

Task<WaitOutcome> claim_when_due(uv_loop_t* loop, std::span<WaitingPart> parts,
                                 std::chrono::microseconds renew_every,
                                 const OwnedAcquireOptions& options, std::string_view call);

}  // namespace redlimit::detail

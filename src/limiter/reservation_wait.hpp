#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
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

}  // namespace redlimit::detail

#pragma once
// Owner leases of acquire()'s reservations: the model of lua/reservations/leases.lua. A
// reservation that waits longer than the lease is registered; any later reserve, cancel or
// renew call on the key first cancels, as their owners would, those whose leases lapsed.

#include <cstdint>
#include <map>
#include <optional>

#include "algorithms/reservations.hpp"

namespace redlimit::detail {

/// A reservation registered under its owner's lease: what a cancel of it needs.
struct HeldReservation {
  std::int64_t expiry_us = 0;  ///< the lease's expiry, server time
  std::int64_t permits = 0;
  CancelTicket ticket;
};

/// A key's registered reservations by version (lua: `<key>:leases` and `<key>:held`).
using HeldReservations = std::map<std::int64_t, HeldReservation>;

/// How many lapsed leases one call reclaims at most (lua: RECLAIM_MAX).
inline constexpr std::size_t reclaim_max = 256;

/// Registers the allowed reservation `outcome` of `n` permits under the limit `spec` if it
/// waits longer than `lease_us` (> 0); returns the lease's expiry, or 0 if not registered.
std::int64_t register_lease(HeldReservations& held, const LimitSpec& spec,
                            const ReserveOutcome& outcome, std::int64_t now, std::int64_t n,
                            std::int64_t lease_us);

/// Cancels, under the policy in force (`spec`, `change`), the registered reservations whose
/// leases expired by `now` (at most reclaim_max, by expiry; the newest reservation first), and
/// removes them; returns how many gave permits back. Stops at a state of a newer policy
/// version, leaving the rest.
std::int64_t reclaim_expired(const LimitSpec& spec, std::optional<LimitState>& state,
                             HeldReservations& held, std::int64_t now, PolicyChange change = {});

/// Extends the lease of `version` to now + lease_us: the new expiry, or 0 if not held.
std::int64_t renew_lease(HeldReservations& held, std::int64_t version, std::int64_t now,
                         std::int64_t lease_us);

/// Ends the registration of `version`: true if it was held.
bool claim_lease(HeldReservations& held, std::int64_t version);

}  // namespace redlimit::detail

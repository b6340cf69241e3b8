#include "algorithms/reservation_leases.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace redlimit::detail {

std::int64_t register_lease(HeldReservations& held, const LimitSpec& spec,
                            const ReserveOutcome& outcome, std::int64_t now, std::int64_t n,
                            std::int64_t lease_us) {
  if (!outcome.decision.allowed || lease_us <= 0 || outcome.wait_us <= lease_us) return 0;
  const std::int64_t expiry = now + lease_us;
  held[outcome.book.version] = {.expiry_us = expiry,
                                .permits = n,
                                .ticket = {.slot = outcome.slot,
                                           .den = spec.a,
                                           .d = spec.b,
                                           .version = outcome.book.version,
                                           .epoch = outcome.book.epoch,
                                           .cancels_before = outcome.book.cancels}};
  return expiry;
}

std::int64_t reclaim_expired(const LimitSpec& spec, std::optional<LimitState>& state,
                             HeldReservations& held, std::int64_t now, PolicyChange change) {
  // As ZRANGEBYSCORE -inf now LIMIT 0 reclaim_max: by expiry, then by member (the version as
  // a string); then newest first.
  std::vector<std::pair<std::int64_t, std::string>> expired;
  for (const auto& [version, reservation] : held) {
    if (reservation.expiry_us <= now)
      expired.emplace_back(reservation.expiry_us, std::to_string(version));
  }
  std::sort(expired.begin(), expired.end());
  if (expired.size() > reclaim_max) expired.resize(reclaim_max);
  std::vector<std::int64_t> versions;
  for (const auto& entry : expired)
    versions.push_back(std::stoll(entry.second));
  std::sort(versions.begin(), versions.end(), std::greater<>());

  std::int64_t returned = 0;
  std::optional<std::int64_t> log_ceiling;
  for (const std::int64_t version : versions) {
    const HeldReservation& reservation = held.at(version);
    const CancelOutcome outcome = cancel_reservation(spec, state, now, reservation.permits,
                                                     reservation.ticket, change, log_ceiling);
    if (outcome.stale_version != 0) return returned;
    if (outcome.verdict == CancelVerdict::returned) {
      if (!log_ceiling) log_ceiling = outcome.book.cancels - 1;
      ++returned;
    }
    held.erase(version);
  }
  return returned;
}

std::int64_t renew_lease(HeldReservations& held, std::int64_t version, std::int64_t now,
                         std::int64_t lease_us) {
  const auto found = held.find(version);
  if (found == held.end()) return 0;
  found->second.expiry_us = now + lease_us;
  return now + lease_us;
}

bool claim_lease(HeldReservations& held, std::int64_t version) {
  return held.erase(version) == 1;
}

}  // namespace redlimit::detail

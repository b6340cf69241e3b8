// acquire_all() on a cluster, claims in several hash slots: each slot's claims reserved with
// one reserve_all, all at one slot (docs/waiting.md, "Several keys").

#include <algorithm>
#include <chrono>

#include "limiter/claims.hpp"
#include "limiter/policy_enforcer.hpp"
#include "limiter/stale_policy.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Gives back what one hash slot's claims hold of `reserved`: a part whose slot is ahead is
/// cancelled (the waiters behind it move up); one taken at once gives back what its take still
/// holds. Why errors are dropped: a part that cannot be given back stays taken until its slot
/// (under-admission, never over).
Task<void> give_back_slot(const std::vector<HeldClaim>& held,
                          const std::vector<DecideRequest>& requests,
                          const std::vector<std::size_t>& group,
                          const ClaimsReservation& reserved) {
  for (std::size_t k = 0; k < group.size(); ++k) {
    const std::size_t i = group[k];
    RedisBackend& backend = *held[i].enforcer->redis_backend();
    try {
      if (reserved.wait_us > 0) {
        co_await backend.cancel(requests[i], reserved.claims[k].ticket);
      } else {
        co_await backend.adjust(requests[i], Adjustment::give_back, requests[i].permits,
                                reserved.slot_us);
      }
    } catch (...) {
    }
  }
}

/// The reservations of every slot, agreeing on one, as one: its claims in the requests' order,
/// the wait until the last slot's wake, and the binding claim (the one whose key set the slot,
/// or with no wait, the fewest remaining).
ClaimsReservation merged(const std::vector<std::vector<std::size_t>>& groups,
                         std::vector<std::optional<ClaimsReservation>>& parts,
                         const std::vector<Clock::time_point>& wakes, std::int64_t slot,
                         std::size_t setter, std::size_t count) {
  ClaimsReservation out;
  out.claims.resize(count);
  std::vector<Decision> decisions;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t k = 0; k < groups[g].size(); ++k)
      out.claims[groups[g][k]] = parts[g]->claims[k];
    Decision decision = parts[g]->decision;
    decision.claim = groups[g][decision.claim];
    decisions.push_back(decision);
  }
  if (slot > 0) {
    out.decision = decisions[setter];
    const auto wake = *std::max_element(wakes.begin(), wakes.end());
    out.wait_us = std::max<std::int64_t>(
        1, std::chrono::ceil<std::chrono::microseconds>(wake - Clock::now()).count());
    out.slot_us = slot;
  } else {
    out.decision = binding_decision(decisions);
    out.decision.claim = decisions[out.decision.claim].claim;
    out.slot_us = out.decision.server_time_us;
  }
  return out;
}

}  // namespace

Task<ClaimsReservation> reserve_claims_across_slots(
    const std::vector<HeldClaim>& held, const std::vector<DecideRequest>& requests,
    const std::vector<std::vector<std::size_t>>& groups,
    const std::function<std::int64_t()>& max_wait_us, std::int64_t lease_us) {
  CommandDispatcher& client = held.front().enforcer->redis_backend()->dispatcher();
  std::vector<std::optional<ClaimsReservation>> parts(groups.size());
  std::vector<Clock::time_point> wakes(groups.size());
  std::int64_t slot = 0;  // the latest slot so far (server time); 0: none ahead
  std::size_t setter = 0;
  std::optional<ClaimsReservation> denial;
  std::exception_ptr error;
  for (bool settled = false; !settled && !denial && !error;) {
    settled = true;
    for (std::size_t g = 0; g < groups.size() && !denial && !error; ++g) {
      if (parts[g] && parts[g]->slot_us >= slot) continue;
      if (parts[g]) {
        // Earlier than the slot a later hash slot's claims set: used there, its permits would
        // be late for the place the key gave them. Given back, and reserved again at it.
        co_await give_back_slot(held, requests, groups[g], *parts[g]);
        parts[g].reset();
      }
      std::vector<DecideRequest> group_requests;
      for (const std::size_t i : groups[g])
        group_requests.push_back(requests[i]);
      std::optional<ClaimsReservation> reserved;
      try {
        reserved =
            co_await reserve_claims_in_redis(client, group_requests, max_wait_us(), lease_us, slot);
      } catch (const StalePolicy& stale) {
        error =
            std::make_exception_ptr(StalePolicy(stale.stored_version(), groups[g][stale.claim()]));
      } catch (...) {
        error = std::current_exception();
      }
      if (error) break;
      if (!reserved->decision.allowed) {
        reserved->decision.claim = groups[g][reserved->decision.claim];
        denial = std::move(reserved);
        break;
      }
      wakes[g] = Clock::now() + std::chrono::microseconds(reserved->wait_us);
      if (reserved->wait_us > 0 && reserved->slot_us > slot) {
        slot = reserved->slot_us;
        setter = g;
        settled = false;
      }
      parts[g] = std::move(reserved);
    }
  }
  if (denial || error) {
    // Why one after another: a caller may abandon the call (destroy its task) meanwhile.
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (parts[g]) co_await give_back_slot(held, requests, groups[g], *parts[g]);
    }
    if (error) std::rethrow_exception(error);
    co_return *denial;
  }
  co_return merged(groups, parts, wakes, slot, setter, requests.size());
}

}  // namespace redlimit::detail

// acquire_all() on a cluster, claims in several hash slots: each slot's claims reserved with
// one reserve_all, all at one slot (docs/waiting.md, "Keys in several slots of a cluster").

#include <algorithm>
#include <chrono>

#include "limiter/claims.hpp"
#include "limiter/policy_enforcer.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Gives back what one hash slot's claims hold of `reserved`: a part whose slot is ahead is
/// cancelled (the waiters behind it move up); one taken at once gives back what its take still
/// holds (nothing when a request was reserved behind it). Why errors are dropped: a part that
/// cannot be given back stays taken until its slot (under-admission, never over).
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

/// Every hash slot's part given back, one after another. Why copies: it may run after the
/// caller's frame is gone (the held claims keep each limiter's backend alive).
Task<void> give_back_slots(std::vector<HeldClaim> held, std::vector<DecideRequest> requests,
                           std::vector<std::vector<std::size_t>> groups,
                           std::vector<std::optional<ClaimsReservation>> parts) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (parts[g]) co_await give_back_slot(held, requests, groups[g], *parts[g]);
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
    const std::vector<std::vector<std::size_t>>& groups, std::function<std::int64_t()> max_wait_us,
    std::int64_t lease_us) {
  CommandDispatcher& client = held.front().enforcer->redis_backend()->dispatcher();
  std::int64_t slot = 0;  // the latest slot so far (server time); 0: none ahead
  std::size_t setter = 0;
  // Why each hash slot is asked first, writing nothing: a part reserved at once and moved later
  // could give back nothing once a request queued behind it (under-admission); asked first,
  // every part is reserved at the latest slot, still ahead, and a denial takes nothing.
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ClaimsReservation earliest;
    try {
      earliest = co_await reserve_claims_in_redis(client, requests_of(requests, groups[g]),
                                                  max_wait_us(), lease_us, slot, true);
    } catch (const StalePolicy& stale) {
      throw StalePolicy(stale.stored_version(), groups[g][stale.claim()]);
    }
    if (!earliest.decision.allowed) {
      earliest.decision.claim = groups[g][earliest.decision.claim];
      co_return earliest;
    }
    if (earliest.wait_us > 0 && earliest.slot_us > slot) {
      slot = earliest.slot_us;
      setter = g;
    }
  }

  std::vector<std::optional<ClaimsReservation>> parts(groups.size());
  std::vector<Clock::time_point> wakes(groups.size());
  // Why a guard: if the task is destroyed meanwhile, the parts reserved so far go back.
  struct GiveBackOnDestruction {
    const std::vector<HeldClaim>& held;
    const std::vector<DecideRequest>& requests;
    const std::vector<std::vector<std::size_t>>& groups;
    std::vector<std::optional<ClaimsReservation>>& parts;
    bool armed = true;
    ~GiveBackOnDestruction() {
      if (!armed || std::none_of(parts.begin(), parts.end(), [](const auto& p) { return p; }))
        return;
      try {
        held.front().enforcer->redis_backend()->background()->start(
            give_back_slots(held, requests, groups, std::move(parts)));
      } catch (...) {
        report_error(std::current_exception());  // out of memory: given back at the slots
      }
    }
  } guard{held, requests, groups, parts};

  std::optional<ClaimsReservation> denial;
  std::exception_ptr error;
  for (bool settled = false; !settled && !denial && !error;) {
    settled = true;
    for (std::size_t g = 0; g < groups.size() && !denial && !error; ++g) {
      if (parts[g] && parts[g]->slot_us >= slot) continue;
      if (parts[g]) {
        // Earlier than the slot a later hash slot's claims set (traffic since they were asked):
        // used there, its permits would be late for the place the key gave them.
        co_await give_back_slot(held, requests, groups[g], *parts[g]);
        parts[g].reset();
      }
      std::optional<ClaimsReservation> reserved;
      try {
        reserved = co_await reserve_claims_in_redis(client, requests_of(requests, groups[g]),
                                                    max_wait_us(), lease_us, slot);
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
  guard.armed = false;
  if (denial || error) {
    co_await give_back_slots(held, requests, groups, std::move(parts));
    if (error) std::rethrow_exception(error);
    co_return *denial;
  }
  co_return merged(groups, parts, wakes, slot, setter, requests.size());
}

}  // namespace redlimit::detail

// acquire_all() in Redis: every claim's key reserved in one call of the reserve script per hash
// slot; on a cluster, claims in several hash slots reserved all at one slot (docs/waiting.md,
// "Keys in several slots of a cluster").

#include <algorithm>
#include <chrono>

#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

using Clock = std::chrono::steady_clock;

/// Appends to `give_backs` what gives back one hash slot's claims' hold of `reserved`: a part
/// whose slot is ahead is cancelled (the waiters behind it move up); one taken at once gives back
/// what its take still holds (nothing when a request was reserved behind it).
void give_back_slot(std::vector<BackendOp>& give_backs, std::span<const DecideRequest> requests,
                    const std::vector<std::size_t>& group, const ClaimsReservation& reserved) {
  for (std::size_t k = 0; k < group.size(); ++k) {
    std::optional<CancelTicket> ticket;
    if (reserved.wait_us > 0) ticket = reserved.claims[k].ticket;
    give_backs.push_back(give_back_op(requests[group[k]], ticket, reserved.slot_us));
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
    decisions.push_back(parts[g]->decision);
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

/// Reserves claims in several hash slots of a cluster (`groups`, slot_groups()) at one slot:
/// the latest of each hash slot's earliest (earliest_all), one hash slot after another; claims
/// reserved earlier than a later hash slot's (traffic in between) are given back and reserved
/// again at its slot, until every hash slot agrees. Until then permits are held unused
/// (under-admission, never over). A denial, or an error (StalePolicy with its claim in the
/// requests' order), comes after every part is given back. Why no guard for the task's
/// destruction: the waiter runs it to its end (outliving()) and gives back what it reserved.
Task<ClaimsReservation> reserve_across_slots(RedisBackend& backend,
                                             std::span<const DecideRequest> requests,
                                             const std::vector<std::vector<std::size_t>>& groups,
                                             std::function<std::int64_t()> max_wait_us) {
  std::int64_t slot = 0;  // the latest slot so far (server time); 0: none ahead
  std::size_t setter = 0;
  // Why each hash slot is asked first, writing nothing: a part reserved at once and moved later
  // could give back nothing once a request queued behind it (under-admission); asked first,
  // every part is reserved at the latest slot, still ahead, and a denial takes nothing.
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const ClaimsReservation earliest =
        co_await backend.reserve_group(requests_of(requests, groups[g]), max_wait_us(), slot, true);
    if (!earliest.decision.allowed) co_return earliest;
    if (earliest.wait_us > 0 && earliest.slot_us > slot) {
      slot = earliest.slot_us;
      setter = g;
    }
  }

  std::vector<std::optional<ClaimsReservation>> parts(groups.size());
  std::vector<Clock::time_point> wakes(groups.size());
  std::optional<ClaimsReservation> denial;
  std::exception_ptr error;
  for (bool settled = false; !settled && !denial && !error;) {
    settled = true;
    for (std::size_t g = 0; g < groups.size() && !denial && !error; ++g) {
      if (parts[g] && parts[g]->slot_us >= slot) continue;
      if (parts[g]) {
        // Earlier than the slot a later hash slot's claims set (traffic since they were asked):
        // used there, its permits would be late for the place the key gave them.
        std::vector<BackendOp> give_backs;
        give_back_slot(give_backs, requests, groups[g], *parts[g]);
        co_await give_back_claims(backend, std::move(give_backs));
        parts[g].reset();
      }
      std::optional<ClaimsReservation> reserved;
      try {
        reserved = co_await backend.reserve_group(requests_of(requests, groups[g]), max_wait_us(),
                                                  slot, false);
      } catch (...) {
        error = std::current_exception();
      }
      if (error) break;
      if (!reserved->decision.allowed) {
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
    // Why every slot's at once: one round trip, not one per slot.
    std::vector<BackendOp> give_backs;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (parts[g]) give_back_slot(give_backs, requests, groups[g], *parts[g]);
    }
    co_await give_back_claims(backend, std::move(give_backs));
    if (error) std::rethrow_exception(error);
    co_return *denial;
  }
  co_return merged(groups, parts, wakes, slot, setter, requests.size());
}

}  // namespace

Task<void> RedisBackend::perform(ReserveClaimsOp& op) {
  const auto groups = slot_groups(op.requests, client_.is_cluster());
  if (groups.size() > 1) {
    op.result = co_await reserve_across_slots(*this, op.requests, groups, op.max_wait_us);
    co_return;
  }
  ReserveGroupOp group{op.requests, op.max_wait_us()};
  co_await perform(group);
  op.result = std::move(group.result);
}

Task<void> RedisBackend::perform(ReserveGroupOp& op) {
  const std::span<const DecideRequest> requests = op.requests;
  const bool earliest_only = op.earliest_only;
  ReserveScriptCall call(requests, earliest_only ? "earliest_all" : "reserve_all");
  call.add_number(op.max_wait_us);
  call.add_number(lease_us());
  call.add_number(static_cast<std::int64_t>(requests.size()));
  for (const DecideRequest& request : requests) {  // its permits, policy epoch and limit
    call.add_number(request.permits);
    for (const std::string& field : request.policy->epoch_fields())
      call.add_argument(field);
    for (const std::string& field : request.policy->limits().front().fields)
      call.add_argument(field);
  }
  call.add_number(op.earliest_slot_us);
  const Reply reply =
      co_await calls_.eval(scripts::reserve, call.keys(), call.args(), client_.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() == 3 && fields[0].as_integer() == -1) {
    const std::size_t stale =
        reply_index(fields[2].as_integer(), requests.size(), "reserve", "claim");
    throw StalePolicy(fields[1].as_integer(), requests[stale].claim);
  }
  const bool allowed = !fields.empty() && fields[0].as_integer() == 1;
  const bool with_claims = allowed && !earliest_only;
  if (fields.size() != 9 + (with_claims ? 4 * requests.size() : 0)) {
    throw ProtocolError("the reserve script returned " + std::to_string(fields.size()) +
                        " fields for " + std::to_string(requests.size()) + " claims");
  }
  const std::size_t binding =
      reply_index(fields[2].as_integer(), requests.size(), "reserve", "claim");
  ClaimsReservation& out = op.result;
  out.decision = decision_from_fields(fields, 3, 0);
  out.decision.claim = requests[binding].claim;
  out.decision.policy_version = requests[binding].policy->epoch().version;
  out.wait_us = fields[7].as_integer();
  out.slot_us = fields[8].as_integer();
  for (std::size_t i = 0; with_claims && i < requests.size(); ++i) {
    const LimitSpec& spec = requests[i].policy->limits().front().spec;
    const std::size_t at = 9 + 4 * i;
    const ReservationBook book{fields[at].as_integer(), fields[at + 1].as_integer(),
                               fields[at + 2].as_integer()};
    out.claims.push_back({.ticket = ticket_of({out.slot_us, 0}, spec.a, spec.b, book),
                          .lease_expiry_us = fields[at + 3].as_integer()});
  }
}

}  // namespace redlimit::detail

// Claims in process: each limiter keeps its own state in its own LocalBackend, and the claims
// are decided one after another, each on its limiter's backend. Nothing else runs between these
// synchronous steps: together they are atomic, as a script is in Redis, and decide as the decide
// and reserve scripts' models over every claim would (reserve_at_one_slot()).

#include <algorithm>
#include <optional>

#include "limiter/local_backend.hpp"

namespace redlimit::detail {

Decision binding_decision(std::span<const Decision> decisions) {
  const bool all_allowed = std::ranges::all_of(decisions, &Decision::allowed);
  std::size_t binding = 0;
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    const Decision& candidate = decisions[i];
    const Decision& best = decisions[binding];
    if (all_allowed
            ? candidate.remaining < best.remaining
            : !candidate.allowed && (best.allowed || candidate.retry_after > best.retry_after)) {
      binding = i;
    }
  }
  Decision out = decisions[binding];
  out.allowed = all_allowed;
  out.claim = binding;
  return out;
}

Task<ClaimsDecision> LocalBackend::decide_claims(std::span<Backend* const> backends,
                                                 std::span<const DecideRequest> requests,
                                                 Operation operation) {
  // Why every claim peeked first: time passing only frees permits, so when every claim's peek
  // allows, every take does.
  std::vector<DecideRequest> asked(requests.begin(), requests.end());
  const Operation steps[] = {Operation::peek, Operation::acquire};
  ClaimsDecision out;
  for (const Operation step : steps) {
    std::vector<Decision> decisions;
    for (std::size_t i = 0; i < asked.size(); ++i) {
      asked[i].operation = step;
      const Decision decided = co_await backends[i]->decide(asked[i]);
      decisions.push_back(decided);
    }
    out.decision = binding_decision(decisions);
    if (!out.decision.allowed || operation == Operation::peek) break;
  }
  co_return out;
}

Task<ClaimsReservation> LocalBackend::reserve_claims(std::span<Backend* const> backends,
                                                     std::span<const DecideRequest> requests,
                                                     std::function<std::int64_t()> max_wait_us) {
  const std::int64_t max_wait = max_wait_us();
  // Why one time for every claim: reserve_at_one_slot() reads it once.
  const std::int64_t now = now_of(requests.front());
  std::vector<DecideRequest> at_now(requests.begin(), requests.end());
  for (DecideRequest& request : at_now)
    request.now_us = now;
  // Each claim asked for its earliest slot, writing nothing: the first stale claim refuses; else
  // the first denial of the longest retry; else the first claim of the longest wait sets the slot.
  std::optional<Decision> denial;
  std::optional<std::size_t> setter;
  std::int64_t wait = 0;
  for (std::size_t i = 0; i < at_now.size(); ++i) {
    const ClaimsReservation earliest = co_await backends[i]->reserve_group(
        std::span<const DecideRequest>(&at_now[i], 1), max_wait, 0, true);
    if (!earliest.decision.allowed) {
      if (!denial || earliest.decision.retry_after > denial->retry_after)
        denial = earliest.decision;
    } else if (earliest.wait_us > wait) {
      wait = earliest.wait_us;
      setter = i;
    }
  }
  if (denial) {
    ClaimsReservation denied{.decision = *denial};
    co_return denied;
  }
  // Every claim reserved at that slot (none: at once); the one that set it binds, else the first
  // of the fewest remaining.
  ClaimsReservation out{.wait_us = wait, .slot_us = now + wait};
  std::vector<Decision> reserved;
  for (std::size_t i = 0; i < at_now.size(); ++i) {
    ClaimsReservation part = co_await backends[i]->reserve_group(
        std::span<const DecideRequest>(&at_now[i], 1), max_wait, setter ? now + wait : 0, false);
    if (!part.decision.allowed) {
      // Why given back: a claim that fit at its earliest slot refuses a later one only at the
      // limits of exact arithmetic; the claims reserved before it cancel their parts.
      for (std::size_t before = 0; before < i; ++before) {
        co_await backends[before]->run_reservation(ReservationOperation::cancel, requests[before],
                                                   out.claims[before].ticket);
      }
      ClaimsReservation refused{.decision = part.decision};
      co_return refused;
    }
    out.claims.push_back(part.claims.front());
    reserved.push_back(part.decision);
  }
  out.decision = setter ? reserved[*setter] : binding_decision(reserved);
  co_return out;
}

}  // namespace redlimit::detail

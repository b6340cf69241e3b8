// Claims in process: each limiter keeps its own state in its own LocalBackend, and the claims
// are decided one after another, each on its limiter's backend. Nothing else runs between these
// synchronous steps: together they are atomic, as a script is in Redis, and decide as the decide
// and reserve scripts' models over every claim would (reserve_at_one_slot()).

#include <algorithm>
#include <optional>

#include "limiter/local_backend.hpp"

namespace redlimit::detail {

Task<void> LocalBackend::perform(DecideClaimsOp& op) {
  const std::span<Backend* const> backends = op.backends;
  // Why every claim peeked first: time passing only frees permits, so when every claim's peek
  // allows, every take does.
  std::vector<DecideRequest> asked(op.requests.begin(), op.requests.end());
  const Operation steps[] = {Operation::peek, Operation::acquire};
  ClaimsDecision& out = op.result;
  for (const Operation step : steps) {
    std::vector<Decision> decisions;
    for (std::size_t i = 0; i < asked.size(); ++i) {
      asked[i].operation = step;
      const Decision decided = co_await backends[i]->decide(asked[i]);
      decisions.push_back(decided);
    }
    out.decision = binding_decision(decisions);
    if (!out.decision.allowed || op.operation == Operation::peek) break;
  }
}

Task<void> LocalBackend::perform(ReserveClaimsOp& op) {
  const std::span<Backend* const> backends = op.backends;
  const std::span<const DecideRequest> requests = op.requests;
  const std::int64_t max_wait = op.max_wait_us();
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
    op.result = {.decision = *denial};
    co_return;
  }
  // Every claim reserved at that slot (none: at once); the one that set it binds, else the first
  // of the fewest remaining.
  ClaimsReservation& out = op.result;
  out = {.wait_us = wait, .slot_us = now + wait};
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
      op.result = {.decision = part.decision};
      co_return;
    }
    out.claims.push_back(part.claims.front());
    reserved.push_back(part.decision);
  }
  out.decision = setter ? reserved[*setter] : binding_decision(reserved);
}

}  // namespace redlimit::detail

// Several claims reserved at one slot (acquire_all()): the model of lua/reserve.lua's
// reserve_all.

#include <algorithm>

#include "algorithms/reservations.hpp"

namespace redlimit::detail {
namespace {

/// Every claim decided dry at `not_before`: the first denial with the longest retry, at least
/// the wait until not_before and `earliest_slot` (or the first stale claim), or none when all
/// fit; `decided` gets each claim's outcome.
std::optional<ReserveAllOutcome> refusal(std::size_t count, std::int64_t now,
                                         std::int64_t not_before, std::int64_t earliest_slot,
                                         const ReserveClaim& reserve_claim,
                                         std::vector<ReserveOutcome>& decided) {
  decided.clear();
  std::optional<ReserveAllOutcome> denied;
  for (std::size_t c = 0; c < count; ++c) {
    ReserveOutcome outcome = reserve_claim(c, not_before, true);
    if (outcome.decision.stale_version != 0) {
      ReserveAllOutcome stale;
      stale.decision.stale_version = outcome.decision.stale_version;
      stale.binding = c;
      return stale;
    }
    if (!outcome.decision.allowed) {
      outcome.decision.retry_after_us =
          std::max(outcome.decision.retry_after_us, std::max(not_before, earliest_slot) - now);
      if (!denied || outcome.decision.retry_after_us > denied->decision.retry_after_us) {
        denied.emplace();
        denied->decision = outcome.decision;
        denied->binding = c;
      }
    }
    decided.push_back(std::move(outcome));
  }
  return denied;
}

/// The claim that binds: `longest`, whose key set the slot, or the first with the fewest
/// permits remaining.
std::size_t binding_of(const std::vector<ReserveOutcome>& outcomes,
                       std::optional<std::size_t> longest) {
  if (longest) return *longest;
  std::size_t binding = 0;
  for (std::size_t c = 1; c < outcomes.size(); ++c) {
    if (outcomes[c].decision.remaining < outcomes[binding].decision.remaining) binding = c;
  }
  return binding;
}

}  // namespace

ReserveAllOutcome reserve_at_one_slot(std::size_t count, std::int64_t now,
                                      const ReserveClaim& reserve_claim,
                                      std::int64_t earliest_slot_us, bool earliest_only) {
  std::vector<ReserveOutcome> decided;
  if (auto refused = refusal(count, now, 0, earliest_slot_us, reserve_claim, decided))
    return std::move(*refused);
  std::int64_t wait = 0;
  std::optional<std::size_t> longest;
  for (std::size_t c = 0; c < count; ++c) {
    if (decided[c].wait_us > wait) {
      wait = decided[c].wait_us;
      longest = c;
    }
  }
  if (earliest_slot_us - now > wait) {
    wait = earliest_slot_us - now;
    longest.reset();
  }
  ReserveAllOutcome out;
  out.wait_us = wait;
  out.slot_us = now + wait;
  if (earliest_only) {
    out.binding = binding_of(decided, longest);
    out.decision = decided[out.binding].decision;
  } else {
    const std::int64_t slot = wait > 0 ? now + wait : 0;
    if (auto refused = refusal(count, now, slot, earliest_slot_us, reserve_claim, decided))
      return std::move(*refused);
    for (std::size_t c = 0; c < count; ++c)
      out.claims.push_back(reserve_claim(c, slot, false));
    out.binding = binding_of(out.claims, longest);
    out.decision = out.claims[out.binding].decision;
  }
  out.decision.allowed = true;
  out.decision.now_us = now;
  return out;
}

}  // namespace redlimit::detail

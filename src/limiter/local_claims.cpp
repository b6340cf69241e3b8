// Claims in process: each limiter keeps its own state in its own LocalBackend, so the claims of
// one limiter are one group, and the groups of several limiters are decided one after another.
// Nothing else runs between these synchronous steps: together they are atomic, as a script is in
// Redis, and decide as the decide and reserve scripts' models over every claim would.

#include <algorithm>
#include <optional>

#include "limiter/local_backend.hpp"
#include "policy/stale_policy.hpp"

namespace redlimit::detail {
namespace {

/// The claims' indexes by backend (limiter), each group where its first claim is.
std::vector<std::vector<std::size_t>> backend_groups(std::span<Backend* const> backends) {
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const auto at = std::find_if(groups.begin(), groups.end(), [&](const auto& group) {
      return backends[group.front()] == backends[i];
    });
    if (at == groups.end()) {
      groups.push_back({i});
    } else {
      at->push_back(i);
    }
  }
  return groups;
}

/// Whether `candidate` binds rather than `bound` (both named by their claim), as the first claim
/// of the longest retry (`denied`) or of the fewest remaining does.
bool binds_before(const Decision& candidate, const Decision& bound, bool denied) {
  const auto rank = [denied](const Decision& d) {
    return denied ? -d.retry_after.count() : d.remaining;
  };
  return rank(candidate) < rank(bound) ||
         (rank(candidate) == rank(bound) && candidate.claim < bound.claim);
}

}  // namespace

Decision binding_decision(std::span<const Decision> decisions) {
  bool all_allowed = true;
  for (const Decision& decision : decisions)
    all_allowed = all_allowed && decision.allowed;
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
      Decision decision = co_await backends[i]->decide(asked[i]);
      decisions.push_back(decision);
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
  // Why one time for every group: reserve_at_one_slot() over every claim reads it once.
  const std::int64_t now = now_of(requests.front());
  std::vector<DecideRequest> at_now(requests.begin(), requests.end());
  for (DecideRequest& request : at_now)
    request.now_us = now;
  const auto groups = backend_groups(backends);
  // Each group asked for its earliest slot, writing nothing: the first stale claim refuses;
  // else the denial of the longest retry; else the longest wait (the first claim on a tie).
  std::optional<StalePolicy> stale;
  std::optional<Decision> denial;
  std::optional<Decision> setter;
  std::int64_t wait = 0;
  for (const std::vector<std::size_t>& group : groups) {
    std::optional<ClaimsReservation> earliest;
    try {
      earliest = co_await backends[group.front()]->reserve_group(requests_of(at_now, group),
                                                                 max_wait, 0, true);
    } catch (const StalePolicy& refused) {
      if (!stale || group[refused.claim()] < stale->claim())
        stale.emplace(refused.stored_version(), group[refused.claim()]);
      continue;
    }
    Decision& decision = earliest->decision;
    decision.claim = group[decision.claim];
    if (!decision.allowed) {
      if (!denial || binds_before(decision, *denial, true)) denial = decision;
    } else if (earliest->wait_us > wait ||
               (earliest->wait_us == wait && wait > 0 && decision.claim < setter->claim)) {
      wait = earliest->wait_us;
      setter = decision;
    }
  }
  if (stale) throw *stale;
  if (denial) {
    ClaimsReservation denied{.decision = *denial};
    co_return denied;
  }
  // Every group reserved at the latest slot (none: at once). The binding claim is the one whose
  // key set the slot, else the first of the fewest remaining.
  ClaimsReservation out{.wait_us = wait, .slot_us = now + wait};
  out.claims.resize(requests.size());
  std::optional<Decision> binding;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ClaimsReservation part = co_await backends[groups[g].front()]->reserve_group(
        requests_of(at_now, groups[g]), max_wait, wait > 0 ? now + wait : 0, false);
    part.decision.claim = groups[g][part.decision.claim];
    if (!part.decision.allowed) {
      // Why given back: a group that fit at its earliest slot refuses the later one only at the
      // limits of exact arithmetic; the groups reserved before it cancel their parts.
      for (std::size_t before = 0; before < g; ++before) {
        for (const std::size_t i : groups[before])
          co_await backends[i]->cancel(requests[i], out.claims[i].ticket);
      }
      ClaimsReservation refused{.decision = part.decision};
      co_return refused;
    }
    for (std::size_t k = 0; k < groups[g].size(); ++k)
      out.claims[groups[g][k]] = part.claims[k];
    const bool sets_slot = setter && part.decision.claim == setter->claim;
    if (!binding || sets_slot || (!setter && binds_before(part.decision, *binding, false)))
      binding = part.decision;
  }
  out.decision = *binding;
  co_return out;
}

}  // namespace redlimit::detail

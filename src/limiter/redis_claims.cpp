// try_acquire_all() and peek_all() in Redis: every claim's limits in one call of the decide
// script per hash slot; across a cluster's slots, slot after slot, with give-backs.

#include <algorithm>
#include <string>
#include <unordered_map>

#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "policy/stale_policy.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

/// Decides every request at once, all or nothing, with one call of the decide script's
/// several-claim form (acquire_all, or peek_all): Decision::claim and binding name the binding
/// request and its limit, policy_version is that request's; StalePolicy with its claim. The
/// requests' keys are distinct, and in one slot on a cluster.
Task<Decision> decide_in_one_call(CommandDispatcher& client,
                                  std::span<const DecideRequest> requests, Operation operation) {
  GeneralScriptCall call(requests, operation == Operation::acquire ? "acquire_all" : "peek_all",
                         requests.front().permits);
  call.add_number(static_cast<std::int64_t>(requests.size()));
  for (const DecideRequest& request : requests) {  // its number of keys, permits, policy epoch
    call.add_number(static_cast<std::int64_t>(request.policy->limits().size()));
    call.add_number(request.permits);
    for (const std::string& field : request.policy->epoch_fields())
      call.add_argument(field);
  }
  const Reply reply = co_await script_executor_of(client).eval(
      scripts::decide, call.keys(), call.args(), client.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() == 3 && fields[0].as_integer() == -1) {
    const std::size_t stale =
        reply_index(fields[2].as_integer(), requests.size(), "decide", "claim");
    throw StalePolicy(fields[1].as_integer(), requests[stale].claim);
  }
  Decision decision = decision_from_reply(reply, call.keys().size());
  // The binding limit counts the limits of all claims: which claim's, and which of its limits.
  std::size_t binding = decision.binding;
  for (std::size_t claim = 0; claim < requests.size(); ++claim) {
    const std::size_t limits = requests[claim].policy->limits().size();
    if (binding < limits) {
      decision.claim = requests[claim].claim;
      decision.binding = binding;
      decision.policy_version = requests[claim].policy->epoch().version;
      break;
    }
    binding -= limits;
  }
  co_return decision;
}

/// Claims in several hash slots of a cluster (`groups`, slot_groups()): one script call per
/// slot, atomic there, slot after slot. When a slot's claims are denied, or its call fails,
/// every slot that took gives back what its take still holds (Adjustment::give_back), and the
/// decision is that denial (or the error); until then the permits are held unused
/// (under-admission, never over). A peek asks every slot and takes nothing.
Task<ClaimsDecision> decide_across_slots(RedisBackend& backend,
                                         std::span<const DecideRequest> requests,
                                         const std::vector<std::vector<std::size_t>>& groups,
                                         Operation operation) {
  std::vector<Decision> decided;  // per group
  std::optional<Decision> denial;
  std::exception_ptr error;
  for (const std::vector<std::size_t>& group : groups) {
    const std::vector<DecideRequest> group_requests = requests_of(requests, group);
    try {
      Decision decision =
          co_await decide_in_one_call(backend.dispatcher(), group_requests, operation);
      if (!decision.allowed && operation == Operation::acquire) {
        denial = decision;
        break;
      }
      decided.push_back(decision);
    } catch (...) {
      error = std::current_exception();
      break;
    }
  }
  if (operation == Operation::acquire && (denial || error)) {
    // Why at once: one round trip, and none outlives this frame if the caller abandons the call.
    std::vector<BackendOp> give_backs;
    for (std::size_t g = 0; g < decided.size(); ++g) {
      for (const std::size_t i : groups[g])
        give_backs.push_back(give_back_op(requests[i], std::nullopt, decided[g].server_time_us));
    }
    co_await give_back_claims(backend, std::move(give_backs));
  }
  if (error) std::rethrow_exception(error);
  if (denial) {
    ClaimsDecision denied{.decision = *denial};
    co_return denied;
  }
  ClaimsDecision out{.decision = binding_decision(decided),
                     .server_times_us = std::vector<std::int64_t>(requests.size())};
  out.decision.claim = decided[out.decision.claim].claim;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const std::size_t i : groups[g])
      out.server_times_us[i] = decided[g].server_time_us;
  }
  co_return out;
}

}  // namespace

std::vector<std::vector<std::size_t>> slot_groups(std::span<const DecideRequest> requests,
                                                  bool cluster) {
  std::unordered_map<std::string, std::size_t> claimed;
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::uint16_t> slots;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (const CompiledLimit& limit : requests[i].policy->limits()) {
      const std::string key = requests[i].key_base.str() + limit.key_suffix;
      const auto [at, fresh] = claimed.emplace(key, i);
      if (!fresh) {
        throw InvalidArgument("Claim " + std::to_string(at->second) + " and Claim " +
                              std::to_string(i) + " name the same Redis key '" + key +
                              "': claim a (limiter, key) once, with the permits of both");
      }
    }
    const std::uint16_t slot = cluster ? key_slot(requests[i].key_base.view()) : 0;
    const auto at = std::find(slots.begin(), slots.end(), slot);
    if (at == slots.end()) {
      slots.push_back(slot);
      groups.push_back({i});
    } else {
      groups[static_cast<std::size_t>(at - slots.begin())].push_back(i);
    }
  }
  return groups;
}

Task<void> RedisBackend::perform(DecideClaimsOp& op) {
  const auto groups = slot_groups(op.requests, client_.is_cluster());
  if (groups.size() > 1) {
    op.result = co_await decide_across_slots(*this, op.requests, groups, op.operation);
  } else {
    op.result.decision = co_await decide_in_one_call(client_, op.requests, op.operation);
  }
}

std::vector<DecideRequest> requests_of(std::span<const DecideRequest> requests,
                                       const std::vector<std::size_t>& group) {
  std::vector<DecideRequest> out;
  for (const std::size_t i : group)
    out.push_back(requests[i]);
  return out;
}

}  // namespace redlimit::detail

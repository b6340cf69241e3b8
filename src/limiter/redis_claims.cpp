// try_acquire_all() in Redis: every claim's limits in one call of the decide script; and
// acquire_all()'s reservations, every claim's key in one call of the reserve script.

#include <string>

#include "limiter/claims.hpp"
#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Task<Decision> decide_claims_in_redis(CommandDispatcher& client,
                                      std::span<const DecideRequest> requests,
                                      Operation operation) {
  // Per claim: its number of keys, permits, and policy epoch (lua/shapes/general.lua).
  std::vector<std::string> claim_fields;
  for (const DecideRequest& request : requests) {
    claim_fields.push_back(std::to_string(request.policy->limits().size()));
    claim_fields.push_back(std::to_string(request.permits));
    const auto& epoch = request.policy->epoch_fields();
    claim_fields.insert(claim_fields.end(), epoch.begin(), epoch.end());
  }
  const std::string claim_count = std::to_string(requests.size());
  GeneralScriptCall call(requests, operation == Operation::acquire ? "acquire_all" : "peek_all",
                         requests.front().permits);
  call.add_argument(claim_count);
  for (const std::string& field : claim_fields)
    call.add_argument(field);
  const Reply reply = co_await script_executor_of(client).eval(
      scripts::decide, call.keys(), call.args(), client.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() == 3 && fields[0].as_integer() == -1) {
    const std::int64_t claim = fields[2].as_integer();
    if (claim < 0 || static_cast<std::size_t>(claim) >= requests.size()) {
      throw ProtocolError("the decide script named claim " + std::to_string(claim) + " of " +
                          std::to_string(requests.size()));
    }
    throw StalePolicy(fields[1].as_integer(), static_cast<std::size_t>(claim));
  }
  Decision decision = decision_from_reply(reply, call.keys().size());
  // The binding limit counts the limits of all claims: which claim's, and which of its limits.
  std::size_t binding = decision.binding;
  for (std::size_t claim = 0; claim < requests.size(); ++claim) {
    const std::size_t limits = requests[claim].policy->limits().size();
    if (binding < limits) {
      decision.claim = claim;
      decision.binding = binding;
      decision.policy_version = requests[claim].policy->epoch().version;
      break;
    }
    binding -= limits;
  }
  co_return decision;
}

namespace {

/// The claim a reply names, checked against the number of requests.
std::size_t claim_index(std::int64_t claim, std::size_t requests, std::string_view script) {
  if (claim < 0 || static_cast<std::size_t>(claim) >= requests) {
    throw ProtocolError("the " + std::string(script) + " script named claim " +
                        std::to_string(claim) + " of " + std::to_string(requests));
  }
  return static_cast<std::size_t>(claim);
}

}  // namespace

Task<ClaimsReservation> reserve_claims_in_redis(CommandDispatcher& client,
                                                std::span<const DecideRequest> requests,
                                                std::int64_t max_wait_us, std::int64_t lease_us,
                                                std::int64_t earliest_slot_us, bool earliest_only) {
  std::vector<std::string> keys;
  std::vector<std::string> claim_fields;  // per claim: permits, policy epoch, its limit
  for (const DecideRequest& request : requests) {
    const std::string key = reservation_key(request);
    keys.insert(keys.end(), {key, cancel_log_key(key), leases_key(key), held_key(key)});
    claim_fields.push_back(std::to_string(request.permits));
    const auto& epoch = request.policy->epoch_fields();
    claim_fields.insert(claim_fields.end(), epoch.begin(), epoch.end());
    const auto& fields = request.policy->limits().front().fields;
    claim_fields.insert(claim_fields.end(), fields.begin(), fields.end());
  }
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  const DecideRequest& first = requests.front();
  const std::string permits = std::to_string(first.permits);
  const std::string now = first.now_us != 0 ? std::to_string(first.now_us) : std::string();
  const std::string max_wait = std::to_string(max_wait_us);
  const std::string lease = std::to_string(lease_us);
  const std::string claim_count = std::to_string(requests.size());
  std::vector<std::string_view> args = {earliest_only ? "earliest_all" : "reserve_all", permits,
                                        now};
  const auto& epoch = first.policy->epoch_fields();
  args.insert(args.end(), epoch.begin(), epoch.end());
  const auto& limit = first.policy->limits().front().fields;
  args.insert(args.end(), limit.begin(), limit.end());
  args.insert(args.end(), {max_wait, lease, claim_count});
  args.insert(args.end(), claim_fields.begin(), claim_fields.end());
  const std::string earliest = std::to_string(earliest_slot_us);
  args.push_back(earliest);

  const Reply reply = co_await script_executor_of(client).eval(scripts::reserve, key_views, args,
                                                               client.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() == 3 && fields[0].as_integer() == -1) {
    throw StalePolicy(fields[1].as_integer(),
                      claim_index(fields[2].as_integer(), requests.size(), "reserve"));
  }
  const bool allowed = !fields.empty() && fields[0].as_integer() == 1;
  if (fields.size() != 9 + (allowed && !earliest_only ? 4 * requests.size() : 0)) {
    throw ProtocolError("the reserve script returned " + std::to_string(fields.size()) +
                        " fields for " + std::to_string(requests.size()) + " claims");
  }
  ClaimsReservation out;
  Decision& decision = out.decision;
  decision.allowed = allowed;
  decision.server_time_us = fields[1].as_integer();
  decision.claim = claim_index(fields[2].as_integer(), requests.size(), "reserve");
  decision.binding = 0;
  decision.limit = fields[3].as_integer();
  decision.remaining = fields[4].as_integer();
  decision.retry_after = std::chrono::microseconds(fields[5].as_integer());
  decision.reset_after = std::chrono::microseconds(fields[6].as_integer());
  decision.source = Source::redis;
  decision.policy_version = requests[decision.claim].policy->epoch().version;
  out.wait_us = fields[7].as_integer();
  out.slot_us = fields[8].as_integer();
  if (!allowed || earliest_only) co_return out;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const LimitSpec& spec = requests[i].policy->limits().front().spec;
    const std::size_t at = 9 + 4 * i;
    out.claims.push_back({.ticket = {.slot = {out.slot_us, 0},
                                     .den = spec.a,
                                     .d = spec.b,
                                     .version = fields[at].as_integer(),
                                     .epoch = fields[at + 2].as_integer(),
                                     .cancels_before = fields[at + 1].as_integer()},
                          .lease_expiry_us = fields[at + 3].as_integer()});
  }
  co_return out;
}

}  // namespace redlimit::detail

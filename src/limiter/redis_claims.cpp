// try_acquire_all() in Redis: every claim's limits in one call of the decide script.

#include <string>

#include "limiter/claims.hpp"
#include "limiter/redis_backend.hpp"
#include "limiter/stale_policy.hpp"
#include "lua_scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Task<Decision> decide_claims_in_redis(CommandDispatcher& client,
                                      std::span<const DecideRequest> requests,
                                      Operation operation) {
  std::vector<std::string> keys;
  // Per claim: its number of keys, permits, and policy epoch (lua/shapes/general.lua).
  std::vector<std::string> claim_fields;
  for (const DecideRequest& request : requests) {
    for (const CompiledLimit& limit : request.policy->limits())
      keys.push_back(request.key_base.str() + limit.key_suffix);
    claim_fields.push_back(std::to_string(request.policy->limits().size()));
    claim_fields.push_back(std::to_string(request.permits));
    const auto& epoch = request.policy->epoch_fields();
    claim_fields.insert(claim_fields.end(), epoch.begin(), epoch.end());
  }
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  const std::string claim_count = std::to_string(requests.size());
  const DecideRequest& first = requests.front();
  const std::string permits = std::to_string(first.permits);
  const std::string now = first.now_us != 0 ? std::to_string(first.now_us) : std::string();
  std::vector<std::string_view> args;
  args.reserve(7 + 4 * keys.size() + claim_fields.size());
  args.push_back(operation == Operation::acquire ? "acquire_all" : "peek_all");
  args.push_back(permits);
  args.push_back(now);
  const auto& epoch = first.policy->epoch_fields();
  args.insert(args.end(), epoch.begin(), epoch.end());
  for (const DecideRequest& request : requests) {
    for (const CompiledLimit& limit : request.policy->limits())
      args.insert(args.end(), limit.fields.begin(), limit.fields.end());
  }
  args.push_back(claim_count);
  args.insert(args.end(), claim_fields.begin(), claim_fields.end());

  const Reply reply =
      co_await client.eval(scripts::decide, key_views, args, client.command_deadline());
  const auto& fields = reply.as_array();
  if (fields.size() == 3 && fields[0].as_integer() == -1) {
    const std::int64_t claim = fields[2].as_integer();
    if (claim < 0 || static_cast<std::size_t>(claim) >= requests.size()) {
      throw ProtocolError("the decide script named claim " + std::to_string(claim) + " of " +
                          std::to_string(requests.size()));
    }
    throw StalePolicy(fields[1].as_integer(), static_cast<std::size_t>(claim));
  }
  Decision decision = decision_from_reply(reply, keys.size());
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

}  // namespace redlimit::detail

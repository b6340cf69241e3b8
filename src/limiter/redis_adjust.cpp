// Limiter::refund, penalize and block in Redis: one call of the adjust script.

#include <string>
#include <vector>

#include "limiter/redis_backend.hpp"
#include "limiter/stale_policy.hpp"
#include "lua_scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

AdjustOutcome adjust_outcome_from_reply(const Reply& reply, std::size_t limit_count) {
  const auto& fields = reply.as_array();
  if (fields.size() == 2 && fields[0].as_integer() == -1) throw StalePolicy(fields[1].as_integer());
  AdjustOutcome outcome;
  if (fields.size() == 2 && fields[0].as_integer() == 1) {
    outcome.applied = true;
    outcome.now_us = fields[1].as_integer();
    return outcome;
  }
  if (fields.size() != 3 || fields[0].as_integer() != 0) {
    throw ProtocolError("the adjust script returned an unexpected reply of " +
                        std::to_string(fields.size()) + " fields");
  }
  outcome.refused_limit = limit_index(fields[1].as_integer(), limit_count, "adjust");
  outcome.refusal = fields[2].as_string();
  return outcome;
}

Task<AdjustOutcome> RedisBackend::adjust(const DecideRequest& request, Adjustment adjustment,
                                         std::int64_t amount, std::int64_t taken_at_us) {
  const auto& limits = request.policy->limits();
  std::vector<std::string> keys;
  keys.reserve(limits.size());
  for (const CompiledLimit& limit : limits)
    keys.push_back(request.key_base.str() + limit.key_suffix);
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());

  const std::string amount_text = std::to_string(amount);
  const std::string now = request.now_us != 0 ? std::to_string(request.now_us) : std::string();
  std::vector<std::string_view> args;
  const std::string taken_at = std::to_string(taken_at_us);
  args.reserve(7 + 4 * limits.size());
  args.push_back(adjustment_name(adjustment));
  args.push_back(amount_text);
  args.push_back(now);
  const auto& epoch = request.policy->epoch_fields();
  args.insert(args.end(), epoch.begin(), epoch.end());
  for (const CompiledLimit& limit : limits)
    args.insert(args.end(), limit.fields.begin(), limit.fields.end());
  if (adjustment == Adjustment::give_back) args.push_back(taken_at);

  const Reply reply =
      co_await calls_.eval(scripts::adjust, key_views, args, client_.command_deadline());
  co_return adjust_outcome_from_reply(reply, limits.size());
}

}  // namespace redlimit::detail

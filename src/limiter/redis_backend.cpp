#include "limiter/redis_backend.hpp"

#include "lua_scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Decision decision_from_reply(const Reply& reply, std::size_t limit_count) {
  const auto& fields = reply.as_array();
  if (fields.size() != 7) {
    throw ProtocolError("the decide script returned " + std::to_string(fields.size()) +
                        " fields, expected 7");
  }
  Decision decision;
  decision.allowed = fields[0].as_integer() == 1;
  decision.server_time_us = fields[1].as_integer();
  const std::int64_t binding = fields[2].as_integer();
  if (binding < 0 || static_cast<std::size_t>(binding) >= limit_count) {
    throw ProtocolError("the decide script named limit " + std::to_string(binding) +
                        " of a policy of " + std::to_string(limit_count));
  }
  decision.binding = static_cast<std::size_t>(binding);
  decision.limit = fields[3].as_integer();
  decision.remaining = fields[4].as_integer();
  decision.retry_after = std::chrono::microseconds(fields[5].as_integer());
  decision.reset_after = std::chrono::microseconds(fields[6].as_integer());
  decision.source = Source::redis;
  return decision;
}

Task<Decision> RedisBackend::decide(DecideRequest request) {
  const auto& limits = request.policy->limits();
  std::vector<std::string> keys;
  keys.reserve(limits.size());
  for (const CompiledLimit& limit : limits)
    keys.push_back(request.key_base + limit.key_suffix);
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());

  const std::string permits = std::to_string(request.permits);
  const std::string now = request.now_us != 0 ? std::to_string(request.now_us) : std::string();
  std::vector<std::string_view> args;
  args.reserve(3 + 4 * limits.size());
  args.push_back(request.operation == Operation::acquire ? "acquire" : "peek");
  args.push_back(permits);
  args.push_back(now);
  for (const CompiledLimit& limit : limits)
    args.insert(args.end(), limit.fields.begin(), limit.fields.end());

  const Reply reply =
      co_await client_.eval(scripts::decide, key_views, args, client_.command_deadline());
  co_return decision_from_reply(reply, limits.size());
}

Task<void> RedisBackend::reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base) {
  std::vector<std::string> argv{"DEL"};
  for (const CompiledLimit& limit : policy->limits())
    argv.push_back(key_base + limit.key_suffix);
  co_await client_.command(std::move(argv));
}

}  // namespace redlimit::detail

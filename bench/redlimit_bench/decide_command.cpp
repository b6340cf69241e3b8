#include "decide_command.hpp"

#include "limiter/redis_backend.hpp"
#include "lua_scripts.hpp"
#include "policy/compiled_policy.hpp"
#include "policy/key_format.hpp"

DecideCommand decide_command(const redlimit::Policy& policy, const std::string& prefix,
                             const std::string& name, const std::string& raw_key) {
  namespace detail = redlimit::detail;
  const auto compiled = detail::CompiledPolicy::compile(policy);
  const std::string base = detail::key_base(prefix, detail::escape_key_part(name), raw_key).str();
  const detail::DecideRequest request(compiled, detail::KeyBase(base), detail::Operation::acquire,
                                      1);
  // As RedisBackend::decide sends it.
  if (const detail::scripts::ScriptSource* lean = detail::lean_decide_script(request)) {
    // A lean script: the key, then permits, "" (Redis's own TIME), the policy epoch (pv, since,
    // carry), the limit's three fields.
    const detail::CompiledLimit& limit = compiled->limits().front();
    const auto& epoch = compiled->epoch_fields();
    return {std::string(lean->sha1),
            {"1", base + limit.key_suffix, "1", "", epoch[0], epoch[1], epoch[2], limit.fields[1],
             limit.fields[2], limit.fields[3]},
            std::string(lean->source)};
  }
  // decide: the keys, then operation, permits, "" (Redis's own TIME), the policy epoch, the
  // limits' fields.
  DecideCommand command{
      std::string(detail::scripts::decide.sha1), {}, std::string(detail::scripts::decide.source)};
  command.arguments.push_back(std::to_string(compiled->limits().size()));
  for (const detail::CompiledLimit& limit : compiled->limits())
    command.arguments.push_back(base + limit.key_suffix);
  command.arguments.insert(command.arguments.end(), {"acquire", "1", ""});
  command.arguments.insert(command.arguments.end(), compiled->epoch_fields().begin(),
                           compiled->epoch_fields().end());
  for (const detail::CompiledLimit& limit : compiled->limits())
    command.arguments.insert(command.arguments.end(), limit.fields.begin(), limit.fields.end());
  return command;
}

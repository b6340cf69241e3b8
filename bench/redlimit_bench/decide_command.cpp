#include "decide_command.hpp"

#include "limiter/compiled_policy.hpp"
#include "limiter/key_format.hpp"
#include "lua_scripts.hpp"

DecideCommand decide_command(const redlimit::Policy& policy, const std::string& prefix,
                             const std::string& name, const std::string& raw_key) {
  namespace detail = redlimit::detail;
  const auto compiled = detail::CompiledPolicy::compile(policy);
  const std::string base = detail::key_base(prefix, detail::escape_key_part(name), raw_key);
  DecideCommand command{std::string(detail::scripts::decide.sha1), {}};
  command.arguments.push_back(std::to_string(compiled->limits().size()));
  for (const detail::CompiledLimit& limit : compiled->limits())
    command.arguments.push_back(base + limit.key_suffix);
  // As RedisBackend::decide sends it: operation, permits, "" (Redis's own TIME), limit fields.
  command.arguments.insert(command.arguments.end(), {"acquire", "1", ""});
  for (const detail::CompiledLimit& limit : compiled->limits())
    command.arguments.insert(command.arguments.end(), limit.fields.begin(), limit.fields.end());
  return command;
}

std::string decide_script_source() {
  return std::string(redlimit::detail::scripts::decide.source);
}

#include "redis/script_registry.hpp"

#include "metrics/instruments.hpp"
#include "redis/connection.hpp"

namespace redlimit::detail {

bool ScriptRegistry::is_noscript(const Reply& reply) noexcept {
  return reply.type == Reply::Type::error && std::string_view(reply.str).starts_with("NOSCRIPT");
}

std::span<const std::string_view> ScriptRegistry::first_send(
    Connection& connection, const Script& script, std::span<const std::string_view> evalsha,
    std::vector<std::string_view>& command) const {
  if (connection.script_known(script.index)) return evalsha;
  command.assign(evalsha.begin(), evalsha.end());
  load(connection, script, command);
  return command;
}

std::span<const std::string_view> ScriptRegistry::after_noscript(
    Connection& connection, const Script& script, std::uint64_t sequence,
    std::span<const std::string_view> evalsha, std::vector<std::string_view>& command) const {
  command.assign(evalsha.begin(), evalsha.end());
  // Why every script: a server that forgot one forgot them all.
  connection.forget_scripts();
  if (!connection.script_loaded_after(script.index, sequence)) load(connection, script, command);
  return command;
}

void ScriptRegistry::load(Connection& connection, const Script& script,
                          std::vector<std::string_view>& command) const {
  // EVAL <source> <number of keys> <keys...> <args...>: the EVALSHA with the source in place of
  // the SHA1.
  command[0] = "EVAL";
  command[1] = script.source;
  connection.note_script_load(script.index);
  if (metrics_ != nullptr) metrics_->scripts_loaded.add();
}

}  // namespace redlimit::detail

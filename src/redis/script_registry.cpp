#include "redis/script_registry.hpp"

#include "metrics/instruments.hpp"
#include "redis/connection.hpp"

namespace redlimit::detail {

bool ScriptRegistry::is_noscript(const Reply& reply) noexcept {
  return reply.type == Reply::Type::error && std::string_view(reply.str).starts_with("NOSCRIPT");
}

std::span<const std::string_view> ScriptRegistry::after_noscript(
    Connection& connection, const Script& script, std::uint64_t sequence,
    std::span<const std::string_view> evalsha, std::vector<std::string_view>& command) const {
  command.assign(evalsha.begin(), evalsha.end());
  if (!connection.script_loaded_after(script.index, sequence)) {
    // EVAL <source> <number of keys> <keys...> <args...>: the EVALSHA with the source in place
    // of the SHA1.
    command[0] = "EVAL";
    command[1] = script.source;
    connection.note_script_load(script.index);
    if (metrics_ != nullptr) metrics_->scripts_loaded.add();
  }
  return command;
}

}  // namespace redlimit::detail

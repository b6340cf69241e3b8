#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "lua_scripts.hpp"
#include "redis/command_argv.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::detail {

class Connection;
struct RedisMetrics;

/// The embedded Lua scripts (generated into lua_scripts.hpp with their SHA1 at build time) and
/// what calling them needs: the EVALSHA that runs one, and the command to send when a server
/// answers NOSCRIPT (after a restart, a failover or a SCRIPT FLUSH).
class ScriptRegistry {
 public:
  using Script = scripts::ScriptSource;

  ScriptRegistry() = default;
  /// Counts the scripts it has sent again (RedisMetrics::scripts_loaded) in `metrics`, which
  /// must outlive it.
  explicit ScriptRegistry(RedisMetrics* metrics) noexcept : metrics_(metrics) {}

  /// Every embedded script; `all()[s.index] == &s`.
  std::span<const Script* const> all() const noexcept { return scripts::all; }

  /// `EVALSHA <sha1> <number of keys> <keys...> <args...>`.
  CommandArgv evalsha(const Script& script, std::span<const std::string_view> keys,
                      std::span<const std::string_view> args) const {
    return CommandArgv::evalsha(script, keys, args);
  }

  /// True for a NOSCRIPT error reply.
  static bool is_noscript(const Reply& reply) noexcept;

  /// What to send on `connection` after `evalsha` (a command of evalsha()) was answered
  /// NOSCRIPT there, having been sent with send sequence `sequence`: the same EVALSHA again when
  /// another call's EVAL of the script went out on the connection after it (it will find the
  /// script), else EVAL with the source, which also loads it (recorded on the connection).
  /// The words are put in `command`, which the caller keeps until the command is sent.
  std::span<const std::string_view> after_noscript(Connection& connection, const Script& script,
                                                   std::uint64_t sequence,
                                                   std::span<const std::string_view> evalsha,
                                                   std::vector<std::string_view>& command) const;

 private:
  RedisMetrics* metrics_ = nullptr;
};

}  // namespace redlimit::detail

#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "redis/command_argv.hpp"
#include "redis/script_source.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::detail {

class Connection;
struct RedisMetrics;

/// What calling a Lua script by its SHA1 needs: the EVALSHA that runs one, the EVAL that loads
/// one at its first use on a connection, and the command to send when a server answers NOSCRIPT
/// (a SCRIPT FLUSH, or a restart or failover not yet seen as a reconnect). Which scripts there
/// are is the application's (lua_scripts.hpp).
class ScriptRegistry {
 public:
  using Script = scripts::ScriptSource;

  ScriptRegistry() = default;
  /// Counts the scripts it sends with their source (RedisMetrics::scripts_loaded) in
  /// `metrics`, which must outlive it.
  explicit ScriptRegistry(RedisMetrics* metrics) noexcept : metrics_(metrics) {}

  /// `EVALSHA <sha1> <number of keys> <keys...> <args...>`.
  CommandArgv evalsha(const Script& script, std::span<const std::string_view> keys,
                      std::span<const std::string_view> args) const {
    return CommandArgv::evalsha(script, keys, args);
  }

  /// True for a NOSCRIPT error reply.
  static bool is_noscript(const Reply& reply) noexcept;

  /// What to send on `connection` for `evalsha` (a command of evalsha()): it, when the script is
  /// known there (Connection::script_known), else EVAL with the source, which also loads it.
  /// Why not EVALSHA first: one that met NOSCRIPT is sent again after the commands pipelined
  /// behind it, which another script, already loaded, has decided first. The words are put in
  /// `command`, which the caller keeps until the command is sent.
  std::span<const std::string_view> first_send(Connection& connection, const Script& script,
                                               std::span<const std::string_view> evalsha,
                                               std::vector<std::string_view>& command) const;

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
  /// Makes `command` (an EVALSHA's words) the EVAL that loads `script`, noted on `connection`.
  void load(Connection& connection, const Script& script,
            std::vector<std::string_view>& command) const;

  RedisMetrics* metrics_ = nullptr;
};

}  // namespace redlimit::detail

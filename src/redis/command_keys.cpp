#include "redis/command_keys.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace redlimit::detail {
namespace {

std::string upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

constexpr std::array<std::string_view, 26> keyless_commands = {
    "ACL",    "AUTH",   "BGREWRITEAOF", "BGSAVE",  "CLIENT",   "CLUSTER", "COMMAND",
    "CONFIG", "DBSIZE", "DEBUG",        "ECHO",    "FLUSHALL", "FLUSHDB", "FUNCTION",
    "HELLO",  "INFO",   "LASTSAVE",     "MONITOR", "MULTI",    "EXEC",    "PING",
    "SCRIPT", "SELECT", "SLOWLOG",      "TIME",    "WAIT"};

constexpr std::array<std::string_view, 7> mode_commands = {
    "SUBSCRIBE",    "PSUBSCRIBE",   "SSUBSCRIBE", "UNSUBSCRIBE",
    "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR"};

}  // namespace

std::optional<std::string_view> routing_key(std::span<const std::string> argv) {
  if (argv.size() < 2) return std::nullopt;
  const std::string name = upper(argv[0]);
  if (name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO" ||
      name == "FCALL" || name == "FCALL_RO") {
    if (argv.size() < 4 || argv[2] == "0") return std::nullopt;
    return argv[3];
  }
  if (name == "MEMORY") {
    if (argv.size() >= 3 && upper(argv[1]) == "USAGE") return argv[2];
    return std::nullopt;
  }
  if (std::find(keyless_commands.begin(), keyless_commands.end(), name) != keyless_commands.end()) {
    return std::nullopt;
  }
  return argv[1];
}

bool changes_connection_mode(std::span<const std::string> argv) {
  if (argv.empty()) return false;
  const std::string name = upper(argv[0]);
  return std::find(mode_commands.begin(), mode_commands.end(), name) != mode_commands.end();
}

}  // namespace redlimit::detail

#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace redlimit::detail {

/// The key a command is routed by: the first key of EVAL/EVALSHA/FCALL, nothing for commands
/// that name no key (PING, INFO, SCRIPT, CLIENT, ...), else the first argument.
std::optional<std::string_view> routing_key(std::span<const std::string> argv);

}  // namespace redlimit::detail

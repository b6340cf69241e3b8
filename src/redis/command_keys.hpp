#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace redlimit::detail {

/// The key a command is routed by: the first key of EVAL/EVALSHA/FCALL, nothing for commands
/// that name no key (PING, INFO, SCRIPT, CLIENT, ...), else the first argument.
std::optional<std::string_view> routing_key(std::span<const std::string> argv);

/// True for commands that would turn a request/reply connection into a pub/sub or MONITOR one
/// ((P|S)SUBSCRIBE, their UNSUBSCRIBEs, MONITOR): their replies do not answer one command each,
/// and hiredis 0.14 reads pub/sub replies as its own objects, which a command connection's are
/// not.
bool changes_connection_mode(std::span<const std::string> argv);

}  // namespace redlimit::detail

#pragma once

#include <cstddef>
#include <string_view>

namespace redlimit::detail::scripts {

/// One Lua script the client runs by its SHA1: its text, the SHA1 Redis knows it by, the
/// commands it calls (named in a permission error), and its index among the scripts a
/// connection records as loaded. The redis layer runs any script; which scripts there are is
/// the application's (lua/embed.py generates them into lua_scripts.hpp).
struct ScriptSource {
  std::string_view name;
  std::string_view source;
  std::string_view sha1;
  std::string_view commands;
  std::size_t index;
};

}  // namespace redlimit::detail::scripts

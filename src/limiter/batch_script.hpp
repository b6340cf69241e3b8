#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.hpp"
#include "redis/held_call.hpp"

namespace redlimit::detail {

/// Whether calls of `script` may be coalesced: the batch script (lua/batch.lua) holds it.
bool coalesces(const scripts::ScriptSource& script) noexcept;

/// The words of one call of the batch script. Copied: the batch outlives no caller's frame,
/// but a caller's frame may go while its batch is in flight.
struct BatchWords {
  std::string text;  ///< every word, one after the other
  std::vector<std::string_view> keys;
  std::vector<std::string_view> args;
};

/// The batch script's words for `calls`: the keys of the first `declared_calls` calls; then the
/// call count, the number of the other calls' keys and those keys (lua/batch_across_slots.lua),
/// and, per call, the script's index, key count, argument count and arguments, or "=" for a
/// call of the same script with the same key count and arguments as the call before it
/// (lua/batch.lua).
BatchWords batch_words(std::span<HeldCall* const> calls, std::size_t declared_calls);

}  // namespace redlimit::detail

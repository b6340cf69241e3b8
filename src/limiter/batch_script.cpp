#include "limiter/batch_script.hpp"

#include <algorithm>

namespace redlimit::detail {
namespace {

std::size_t digits_room(std::size_t words) {
  return words * 21;  // the longest decimal of a std::size_t, and a separator
}

/// Whether call `i` runs the same script with as many keys and the same arguments as call i-1.
/// Why: a policy's try_acquire of 1 permit, key after key, is the common batch; Redis makes a
/// Lua string of every word, so a repeat sent as one word saves it most of its work per call.
bool repeats_previous(std::size_t i, std::span<const scripts::ScriptSource* const> scripts,
                      std::span<const std::span<const std::string_view>> keys,
                      std::span<const std::span<const std::string_view>> args) {
  return i > 0 && scripts[i] == scripts[i - 1] && keys[i].size() == keys[i - 1].size() &&
         std::ranges::equal(args[i], args[i - 1]);
}

}  // namespace

bool coalesces(const scripts::ScriptSource& script) noexcept {
  // The batch scripts hold every script but themselves, PolicyStore's and the fleet's counts'
  // (lua/meson.build).
  return &script != &scripts::batch && &script != &scripts::batch_across_slots &&
         &script != &scripts::policy_store && &script != &scripts::fleet_counts &&
         &script != &scripts::fleet_names;
}

BatchWords batch_words(std::span<const scripts::ScriptSource* const> scripts,
                       std::span<const std::span<const std::string_view>> keys,
                       std::span<const std::span<const std::string_view>> args,
                       std::size_t declared_calls) {
  const std::size_t calls = scripts.size();
  BatchWords words;
  std::size_t size = digits_room(2 + 3 * calls);
  std::size_t key_count = 0;
  std::size_t arg_count = 2;
  for (std::size_t i = 0; i < calls; ++i) {
    for (std::string_view key : keys[i])
      size += key.size();
    for (std::string_view arg : args[i])
      size += arg.size();
    key_count += keys[i].size();
    arg_count += 3 + args[i].size();
  }
  // Why reserved whole: the views point into the text, which must not move.
  words.text.reserve(size);
  words.keys.reserve(key_count);
  words.args.reserve(arg_count + key_count);  // the keys not declared are arguments
  auto append = [&words](std::string_view word) {
    const std::size_t at = words.text.size();
    words.text.append(word);
    return std::string_view(words.text.data() + at, word.size());
  };
  auto append_number = [&append](std::size_t number) { return append(std::to_string(number)); };
  std::size_t undeclared = 0;
  for (std::size_t i = declared_calls; i < calls; ++i)
    undeclared += keys[i].size();
  for (std::size_t i = 0; i < declared_calls; ++i) {
    for (std::string_view key : keys[i])
      words.keys.push_back(append(key));
  }
  words.args.push_back(append_number(calls));
  words.args.push_back(append_number(undeclared));
  for (std::size_t i = declared_calls; i < calls; ++i) {
    for (std::string_view key : keys[i])
      words.args.push_back(append(key));
  }
  for (std::size_t i = 0; i < calls; ++i) {
    if (repeats_previous(i, scripts, keys, args)) {
      words.args.push_back(append("="));
      continue;
    }
    words.args.push_back(append_number(scripts[i]->index));
    words.args.push_back(append_number(keys[i].size()));
    words.args.push_back(append_number(args[i].size()));
    for (std::string_view arg : args[i])
      words.args.push_back(append(arg));
  }
  return words;
}

}  // namespace redlimit::detail

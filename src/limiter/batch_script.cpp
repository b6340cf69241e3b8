#include "limiter/batch_script.hpp"

#include <algorithm>

namespace redlimit::detail {

bool coalesces(const scripts::ScriptSource& script) noexcept {
  // The batch scripts hold every script but themselves, PolicyStore's and the fleet's counts'
  // (lua/meson.build).
  return &script != &scripts::batch && &script != &scripts::batch_across_slots &&
         &script != &scripts::policy_store && &script != &scripts::fleet_counts &&
         &script != &scripts::fleet_names;
}

BatchWords batch_words(std::span<HeldCall* const> calls, std::size_t declared_calls) {
  // Why reserved whole: the views point into the text, which must not move. 21: the longest
  // decimal of a std::size_t, and a separator.
  std::size_t size = 21 * (2 + 3 * calls.size());
  std::size_t key_count = 0;
  std::size_t arg_count = 2;
  for (const HeldCall* call : calls) {
    for (std::string_view key : call->keys)
      size += key.size();
    for (std::string_view arg : call->args)
      size += arg.size();
    key_count += call->keys.size();
    arg_count += 3 + call->args.size();
  }
  BatchWords words;
  words.text.reserve(size);
  words.keys.reserve(key_count);
  words.args.reserve(arg_count + key_count);  // the keys not declared are arguments
  auto append = [&words](std::string_view word) {
    const std::size_t at = words.text.size();
    words.text.append(word);
    return std::string_view(words.text.data() + at, word.size());
  };
  auto append_number = [&append](std::size_t number) { return append(std::to_string(number)); };
  for (const HeldCall* call : calls.first(declared_calls)) {
    for (std::string_view key : call->keys)
      words.keys.push_back(append(key));
  }
  words.args.push_back(append_number(calls.size()));
  words.args.push_back(append_number(key_count - words.keys.size()));  // the keys not declared
  for (const HeldCall* call : calls.subspan(declared_calls)) {
    for (std::string_view key : call->keys)
      words.args.push_back(append(key));
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const HeldCall& call = *calls[i];
    // Why: a policy's try_acquire of 1 permit, key after key, is the common batch; Redis makes
    // a Lua string of every word, so a repeat sent as one word saves it most of its work.
    if (i > 0 && call.script == calls[i - 1]->script &&
        call.keys.size() == calls[i - 1]->keys.size() &&
        std::ranges::equal(call.args, calls[i - 1]->args)) {
      words.args.push_back(append("="));
      continue;
    }
    words.args.push_back(append_number(call.script->index));
    words.args.push_back(append_number(call.keys.size()));
    words.args.push_back(append_number(call.args.size()));
    for (std::string_view arg : call.args)
      words.args.push_back(append(arg));
  }
  return words;
}

}  // namespace redlimit::detail

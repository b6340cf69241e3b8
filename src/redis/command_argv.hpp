#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "redis/script_source.hpp"

namespace redlimit::detail {

/// The words of one command, kept by the coroutine that sends it: views of text that outlives
/// the call, and an EVALSHA's key count, which is formatted here.
///
/// Why a value of its own: it is moved into that coroutine's frame, so a caller that only
/// prepares a command (CommandDispatcher::eval) needs no coroutine frame of its own.
class CommandArgv {
 public:
  /// A command of the given words.
  explicit CommandArgv(std::span<const std::string_view> words);
  /// `EVALSHA <sha1> <number of keys> <keys...> <args...>`.
  static CommandArgv evalsha(const scripts::ScriptSource& script,
                             std::span<const std::string_view> keys,
                             std::span<const std::string_view> args);

  /// Why by hand: the key count's word points into the object itself.
  CommandArgv(CommandArgv&& other) noexcept;
  CommandArgv(const CommandArgv&) = delete;
  CommandArgv& operator=(const CommandArgv&) = delete;
  CommandArgv& operator=(CommandArgv&&) = delete;

  std::span<const std::string_view> words() const noexcept {
    return {heap_.empty() ? inline_.data() : heap_.data(), size_};
  }

 private:
  explicit CommandArgv(std::size_t size);
  std::span<std::string_view> room() noexcept {
    return {heap_.empty() ? inline_.data() : heap_.data(), size_};
  }

  static constexpr std::size_t key_count_word = 2;  ///< EVALSHA's number of keys

  std::size_t size_;
  // Why 20: the library's longest fixed command (a reservation's cancel) has 17 words, and the
  // object lives in a frame of every command in flight.
  std::array<std::string_view, 20> inline_;  ///< the words, unless there are more
  std::vector<std::string_view> heap_;       ///< the words when there are more
  std::array<char, 20> key_count_{};         ///< the digits of key_count_word, for EVALSHA
  std::size_t key_count_size_ = 0;           ///< 0 when this is not an EVALSHA
};

}  // namespace redlimit::detail

#include "redis/command_argv.hpp"

#include <algorithm>
#include <charconv>

namespace redlimit::detail {

CommandArgv::CommandArgv(std::size_t size) : size_(size) {
  if (size > inline_.size()) heap_.resize(size);
}

CommandArgv::CommandArgv(std::span<const std::string_view> words) : CommandArgv(words.size()) {
  std::copy(words.begin(), words.end(), room().begin());
}

CommandArgv CommandArgv::evalsha(const scripts::ScriptSource& script,
                                 std::span<const std::string_view> keys,
                                 std::span<const std::string_view> args) {
  CommandArgv argv(3 + keys.size() + args.size());
  const auto words = argv.room();
  const auto digits = std::to_chars(argv.key_count_.data(),
                                    argv.key_count_.data() + argv.key_count_.size(), keys.size());
  argv.key_count_size_ = static_cast<std::size_t>(digits.ptr - argv.key_count_.data());
  words[0] = "EVALSHA";
  words[1] = script.sha1;
  words[key_count_word] = std::string_view(argv.key_count_.data(), argv.key_count_size_);
  const auto after_keys = std::copy(keys.begin(), keys.end(), words.begin() + 3);
  std::copy(args.begin(), args.end(), after_keys);
  return argv;
}

CommandArgv::CommandArgv(CommandArgv&& other) noexcept
    : size_(other.size_),
      heap_(std::move(other.heap_)),
      key_count_(other.key_count_),
      key_count_size_(other.key_count_size_) {
  if (heap_.empty()) std::copy_n(other.inline_.begin(), size_, inline_.begin());
  other.size_ = 0;
  other.key_count_size_ = 0;
  if (key_count_size_ != 0) {
    room()[key_count_word] = std::string_view(key_count_.data(), key_count_size_);
  }
}

}  // namespace redlimit::detail

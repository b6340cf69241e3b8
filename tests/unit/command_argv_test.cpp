#include "redis/command_argv.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redlimit::detail {
namespace {

const scripts::ScriptSource& any_script() {
  return scripts::decide_gcra;
}

std::vector<std::string> texts(std::span<const std::string_view> words) {
  return {words.begin(), words.end()};
}

TEST(CommandArgv, KeepsTheWordsOfAPlainCommand) {
  const std::vector<std::string_view> words = {"SET", "k", "v"};
  const CommandArgv argv(words);
  EXPECT_EQ(texts(argv.words()), (std::vector<std::string>{"SET", "k", "v"}));
}

TEST(CommandArgv, AnEvalshaCountsItsKeysAndSurvivesAMove) {
  // Few words stay inside the object, many go to the heap: both must survive a move, the key
  // count (formatted inside the object) included.
  for (const std::size_t key_count : {std::size_t{1}, std::size_t{40}}) {
    const std::vector<std::string> key_texts(key_count, "key");
    const std::vector<std::string_view> keys(key_texts.begin(), key_texts.end());
    const std::vector<std::string_view> args = {"a", "b"};
    CommandArgv made = CommandArgv::evalsha(any_script(), keys, args);
    const CommandArgv moved(std::move(made));
    const std::vector<std::string> words = texts(moved.words());
    ASSERT_EQ(words.size(), 3 + key_count + 2);
    EXPECT_EQ(words[0], "EVALSHA");
    EXPECT_EQ(words[1], any_script().sha1);
    EXPECT_EQ(words[2], std::to_string(key_count));
    EXPECT_EQ(words[3], "key");
    EXPECT_EQ(words[3 + key_count], "a");
    EXPECT_EQ(words.back(), "b");
  }
}

}  // namespace
}  // namespace redlimit::detail

#include "redis/command_argv.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lua_scripts.hpp"

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
    std::optional<CommandArgv> made = CommandArgv::evalsha(any_script(), keys, args);
    // On the heap: a stack slot could be the very one an earlier, destroyed source used.
    const auto moved = std::make_unique<CommandArgv>(std::move(*made));
    made.reset();  // a word still pointing into the source would now dangle
    const auto* const begin = reinterpret_cast<const char*>(moved.get());
    const char* const count = moved->words()[2].data();
    EXPECT_TRUE(count >= begin && count < begin + sizeof(CommandArgv))
        << "the key count is the moved-to object's own";
    const std::vector<std::string> words = texts(moved->words());
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

// The embedded scripts and what a server's NOSCRIPT answer makes the client send.
#include "redis/script_registry.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string_view>
#include <vector>

#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "redis/endpoint.hpp"
#include "redlimit/runtime.hpp"
#include "runtime/logger.hpp"
#include "support/loop_test.hpp"

namespace redlimit::detail {
namespace {

TEST(ScriptRegistry, EachScriptSitsAtItsIndexWithItsSha1) {
  ASSERT_FALSE(scripts::all.empty());
  for (const ScriptRegistry::Script* script : scripts::all) {
    EXPECT_EQ(scripts::all[script->index], script) << script->name;
    EXPECT_EQ(script->sha1.size(), 40u) << script->name;
  }
}

/// A connection that never connects (nothing is sent), for its record of script loads.
class ScriptRegistryTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), connection_.close());
    LoopTest::TearDown();
  }

  const ScriptRegistry registry_{};
  const ScriptRegistry::Script& script_ = scripts::decide_gcra;
  const std::array<std::string_view, 1> keys_ = {"rl:{t:k}"};
  const std::array<std::string_view, 2> args_ = {"1", "2"};
  Connection connection_{loop(), parse_redis_url("redis://127.0.0.1:1"), {}, default_logger()};
  std::vector<std::string_view> reload_;
};

TEST_F(ScriptRegistryTest, AfterNoscriptItSendsEvalWithTheSourceAndRecordsTheLoad) {
  const CommandArgv evalsha = registry_.evalsha(script_, keys_, args_);
  const std::vector<std::string_view> sent(evalsha.words().begin(), evalsha.words().end());
  EXPECT_EQ(sent,
            (std::vector<std::string_view>{"EVALSHA", script_.sha1, "1", "rl:{t:k}", "1", "2"}));
  const auto command = registry_.after_noscript(connection_, script_, 0, evalsha.words(), reload_);
  EXPECT_EQ(std::vector<std::string_view>(command.begin(), command.end()),
            (std::vector<std::string_view>{"EVAL", script_.source, "1", "rl:{t:k}", "1", "2"}));
  EXPECT_TRUE(connection_.script_loaded_after(script_.index, 0));
}

TEST_F(ScriptRegistryTest, AfterAnotherCallsEvalOfTheScriptItSendsTheEvalshaAgain) {
  const CommandArgv evalsha = registry_.evalsha(script_, keys_, args_);
  std::vector<std::string_view> other_reload;
  registry_.after_noscript(connection_, script_, 0, evalsha.words(), other_reload);
  // Our EVALSHA (sent before that EVAL) got NOSCRIPT too: the script is on its way.
  const auto command = registry_.after_noscript(connection_, script_, 0, evalsha.words(), reload_);
  EXPECT_EQ(std::vector<std::string_view>(command.begin(), command.end()),
            std::vector<std::string_view>(evalsha.words().begin(), evalsha.words().end()));
}

}  // namespace
}  // namespace redlimit::detail

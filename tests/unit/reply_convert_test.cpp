#include "redis/reply_convert.hpp"

#include <gtest/gtest.h>

#include "redis/command_keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

TEST(ReplyErrors, TheCodeIsTheFirstWord) {
  EXPECT_EQ(error_code("NOSCRIPT No matching script. Please use EVAL."), "NOSCRIPT");
  EXPECT_EQ(error_code("MOVED 3999 127.0.0.1:6381"), "MOVED");
  EXPECT_EQ(error_code("BUSY Redis is busy running a script."), "BUSY");
}

TEST(ReplyErrors, ErrorRepliesBecomeReplyErrorsKeepingTheCode) {
  try {
    std::rethrow_exception(exception_from_error("BUSY Redis is busy running a script."));
  } catch (const ReplyError& e) {
    EXPECT_EQ(e.code(), "BUSY");
    EXPECT_STREQ(e.what(), "BUSY Redis is busy running a script.");
  }
}

TEST(ReplyErrors, PermissionErrorsBecomeConfigErrorsWithTheHint) {
  for (const char* message :
       {"NOPERM this user has no permissions to run the 'evalsha' command",
        "WRONGPASS invalid username-password pair or user is disabled.",
        "NOAUTH Authentication required.",
        "ERR The user executing the script can't run this command or subcommand script: ab, on "
        "@user_script:1."}) {
    try {
      std::rethrow_exception(exception_from_error(message, "script 'gcra' calls: SET TIME"));
      FAIL() << message;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("calls: SET TIME"), std::string::npos);
    }
  }
}

TEST(CommandKeys, RoutesByTheFirstKeyOrNotAtAll) {
  using V = std::vector<std::string>;
  EXPECT_EQ(routing_key(V{"GET", "k"}), "k");
  EXPECT_EQ(routing_key(V{"evalsha", "sha", "2", "k1", "k2", "arg"}), "k1");
  EXPECT_EQ(routing_key(V{"EVAL", "return 1", "0"}), std::nullopt);
  EXPECT_EQ(routing_key(V{"PING"}), std::nullopt);
  EXPECT_EQ(routing_key(V{"script", "flush"}), std::nullopt);
  EXPECT_EQ(routing_key(V{"MEMORY", "USAGE", "k"}), "k");
}

}  // namespace
}  // namespace redlimit::detail

#include "redis/reply_convert.hpp"

#include <gtest/gtest.h>

#include <utility>

#include "limiter/redis_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "redis/command_keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

TEST(ReplyErrors, TheCodeIsTheFirstWord) {
  EXPECT_EQ(error_code("NOSCRIPT No matching script. Please use EVAL."), "NOSCRIPT");
  EXPECT_EQ(error_code("MOVED 3999 127.0.0.1:6381"), "MOVED");
  EXPECT_EQ(error_code("BUSY Redis is busy running a script."), "BUSY");
}

TEST(ErrorReplies, EachCodeHasOneKind) {
  EXPECT_EQ(classify_error_reply("MOVED 1 h:1"), ErrorReplyKind::redirect);
  EXPECT_EQ(classify_error_reply("ASK 1 h:1"), ErrorReplyKind::redirect);
  EXPECT_EQ(classify_error_reply("TRYAGAIN Multiple keys request during rehashing of slot"),
            ErrorReplyKind::retry_soon);
  EXPECT_EQ(classify_error_reply("CLUSTERDOWN The cluster is down"), ErrorReplyKind::retry_soon);
  EXPECT_EQ(classify_error_reply("LOADING Redis is loading the dataset in memory"),
            ErrorReplyKind::retry_soon);
  EXPECT_EQ(classify_error_reply("MASTERDOWN Link with MASTER is down"),
            ErrorReplyKind::retry_soon);
  EXPECT_EQ(classify_error_reply("READONLY You can't write against a read only replica."),
            ErrorReplyKind::stale_primary);
  EXPECT_EQ(classify_error_reply("BUSY Redis is busy running a script."),
            ErrorReplyKind::server_busy);
  EXPECT_EQ(classify_error_reply("OOM command not allowed when used memory > 'maxmemory'."),
            ErrorReplyKind::server_busy);
  EXPECT_EQ(classify_error_reply("NOREPLICAS Not enough good replicas to write."),
            ErrorReplyKind::server_busy);
  EXPECT_EQ(classify_error_reply("ERR max number of clients reached"), ErrorReplyKind::server_busy);
  EXPECT_EQ(classify_error_reply("NOSCRIPT No matching script. Please use EVAL."),
            ErrorReplyKind::script_missing);
  EXPECT_EQ(classify_error_reply("NOPERM this user has no permissions"),
            ErrorReplyKind::permission);
  EXPECT_EQ(classify_error_reply("ERR The user executing the script can't run this command"),
            ErrorReplyKind::permission);
  EXPECT_EQ(classify_error_reply("ERR Error running script (call to f_1): @user_script:1: "
                                 "@user_script: 1: -READONLY You can't write against a read only "
                                 "replica."),
            ErrorReplyKind::stale_primary);
  // Valkey 8's words for the same.
  EXPECT_EQ(classify_error_reply("ERR ACL failure in script: User limiter has no permissions to "
                                 "run the 'time' command script: 1c54, on @user_script:1266."),
            ErrorReplyKind::permission);
  EXPECT_EQ(classify_error_reply("CROSSSLOT Keys in request don't hash to the same slot"),
            ErrorReplyKind::other);
  EXPECT_EQ(classify_error_reply("ERR wrong number of arguments"), ErrorReplyKind::other);
  EXPECT_EQ(classify_error_reply("MOVEDX 1 h:1"), ErrorReplyKind::other);
}

// The decision that reconciled three lists (the limiter's, the connection setup's and the
// cluster client's): every code one of them treated as "the server cannot serve now" is
// transient everywhere. BUSY, OOM and NOREPLICAS are transient (a limiter applies its failure
// policy, the connection setup retries with backoff) but the cluster client does not retry
// them within a call: they last longer than a deadline as a rule.
TEST(ErrorReplies, EveryCodeOfAServerThatCannotServeNowIsTransient) {
  for (const char* message :
       {"TRYAGAIN x", "CLUSTERDOWN x", "LOADING x", "MASTERDOWN x", "READONLY x", "BUSY x", "OOM x",
        "NOREPLICAS x", "ERR max number of clients reached"}) {
    EXPECT_TRUE(is_transient(classify_error_reply(message))) << message;
    EXPECT_TRUE(means_unavailable(exception_from_error(message))) << message;
  }
  for (const char* message : {"NOSCRIPT x", "NOPERM x", "ERR x", "WRONGTYPE x", "CROSSSLOT x"}) {
    EXPECT_FALSE(is_transient(classify_error_reply(message))) << message;
    EXPECT_FALSE(means_unavailable(exception_from_error(message))) << message;
  }
}

// A call that ends on a redirect (its redirects ran out until its deadline) never reached the
// node that serves its slot: unavailable for the failure policy, yet no failure of the node
// that answered, for its circuit breaker.
TEST(ErrorReplies, ACallEndingOnARedirectIsUnavailableButNoServerFailure) {
  for (const char* message : {"MOVED 1 h:1", "ASK 1 h:1"}) {
    EXPECT_FALSE(is_transient(classify_error_reply(message))) << message;
    EXPECT_TRUE(means_unavailable(exception_from_error(message))) << message;
  }
}

TEST(ErrorReplies, EveryUnavailableMeansUnavailableAndOtherErrorsDoNot) {
  EXPECT_TRUE(means_unavailable(std::make_exception_ptr(ConnectionError("refused"))));
  EXPECT_TRUE(means_unavailable(std::make_exception_ptr(TimeoutError("late", true))));
  EXPECT_TRUE(means_unavailable(std::make_exception_ptr(Overloaded("full"))));
  EXPECT_TRUE(means_unavailable(
      std::make_exception_ptr(CircuitOpen("open", std::chrono::milliseconds(50)))));
  EXPECT_FALSE(means_unavailable(std::make_exception_ptr(ConfigError("wrong password"))));
  EXPECT_FALSE(means_unavailable(std::make_exception_ptr(ProtocolError("bad reply"))));
  EXPECT_FALSE(means_unavailable(std::make_exception_ptr(UsageError("closed"))));
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

TEST(CommandKeys, PubSubAndMonitorCommandsChangeTheConnectionMode) {
  using V = std::vector<std::string>;
  for (const char* name : {"SUBSCRIBE", "psubscribe", "SSubscribe", "UNSUBSCRIBE", "PUNSUBSCRIBE",
                           "SUNSUBSCRIBE", "monitor"}) {
    EXPECT_TRUE(changes_connection_mode(V{name, "news"})) << name;
  }
  EXPECT_FALSE(changes_connection_mode(V{"PUBLISH", "news", "hello"}));
  EXPECT_FALSE(changes_connection_mode(V{"PING"}));
  EXPECT_FALSE(changes_connection_mode(V{}));
}

Reply text_reply(std::string text) {
  Reply reply;
  reply.type = Reply::Type::string;
  reply.str = std::move(text);
  return reply;
}

TEST(LeanReply, SixIntegersSeparatedBySpacesAreADecision) {
  const Decision d = decision_from_lean_reply(text_reply("0 1795000000000000 1000 0 999 1000000"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.server_time_us, 1795000000000000);
  EXPECT_EQ(d.limit, 1000);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after.count(), 999);
  EXPECT_EQ(d.reset_after.count(), 1000000);
  EXPECT_EQ(d.binding, 0u);
  EXPECT_EQ(d.source, Source::redis);
}

TEST(LeanReply, FieldsOfUpTo18DigitsAndASignAreRead) {
  const Decision d =
      decision_from_lean_reply(text_reply("1 999999999999999999 -7 0 -0 000000000000000012"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.server_time_us, 999999999999999999);
  EXPECT_EQ(d.limit, -7);
  EXPECT_EQ(d.retry_after.count(), 0);
  EXPECT_EQ(d.reset_after.count(), 12);
}

TEST(LeanReply, AnyOtherShapeIsAProtocolError) {
  for (const char* text : {"", "1 2 3 4 5", "1 2 3 4 5 6 7", "2 1 1 1 1 1", "1 2 3 4 5 x",
                           "1  2 3 4 5 6", "1 2 3 4 5 6 ", "1 - 3 4 5 6", "1 2 3 4 5 +6",
                           "1 1234567890123456789 3 4 5 6", " 1 2 3 4 5 6", "1 2 3 4 5 6x"}) {
    EXPECT_THROW(decision_from_lean_reply(text_reply(text)), ProtocolError) << '"' << text << '"';
  }
  using namespace std::string_literals;
  for (const std::string& text : {"1 2 3 4 5 6\0"s, "1 2 3\0 4 5 6"s, "1 2 3 4 5\0 6"s}) {
    EXPECT_THROW(decision_from_lean_reply(text_reply(text)), ProtocolError) << "a NUL byte";
  }
  Reply integer;
  integer.type = Reply::Type::integer;
  EXPECT_THROW(decision_from_lean_reply(integer), ProtocolError);
}

DecideRequest request_for(Policy policy, Operation operation) {
  return DecideRequest(CompiledPolicy::compile(std::move(policy)), KeyBase("rl:{t:k}"), operation,
                       1);
}

Limit limit_of(Algorithm algorithm) {
  return Limit{algorithm, Rate::parse("10/s"), 0, Window::aligned};
}

TEST(LeanScript, AnAcquireOnOneLimitRunsItsAlgorithmsLeanScript) {
  const std::pair<Algorithm, const scripts::ScriptSource*> expected[] = {
      {Algorithm::gcra, &scripts::decide_gcra},
      {Algorithm::token_bucket, &scripts::decide_token_bucket},
      {Algorithm::leaky_bucket, &scripts::decide_leaky_bucket},
      {Algorithm::fixed_window, &scripts::decide_fixed_window},
      {Algorithm::sliding_window_counter, &scripts::decide_sliding_window_counter},
      {Algorithm::sliding_window_log, &scripts::decide_sliding_window_log}};
  for (const auto& [algorithm, script] : expected) {
    EXPECT_EQ(lean_decide_script(request_for(Policy::of(limit_of(algorithm)), Operation::acquire)),
              script)
        << to_string(algorithm);
  }
}

TEST(LeanScript, PeeksAndPoliciesOfTwoLimitsRunTheGeneralScript) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket, Algorithm::fixed_window,
        Algorithm::sliding_window_counter, Algorithm::sliding_window_log}) {
    EXPECT_EQ(lean_decide_script(request_for(Policy::of(limit_of(algorithm)), Operation::peek)),
              nullptr)
        << to_string(algorithm);
    Policy two{{limit_of(algorithm), limit_of(Algorithm::fixed_window)}};
    EXPECT_EQ(lean_decide_script(request_for(two, Operation::acquire)), nullptr)
        << to_string(algorithm);
  }
}

}  // namespace
}  // namespace redlimit::detail

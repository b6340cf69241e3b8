#include "redlimit/limiter.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

const Algorithm all_algorithms[] = {
    Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
    Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A limiter test on a private redis-server. It ends by checking that no key lives forever.
class LimiterTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

Policy one(Algorithm algorithm, Rate rate, std::int64_t burst = 0) {
  return Policy::of(Limit{algorithm, rate, burst, Window::aligned});
}

TEST_F(LimiterTest, ADecisionFillsEveryField) {
  Limiter limiter(client(), one(Algorithm::gcra, {10, 1s}), {.name = "api"});
  const std::int64_t before = wall_clock_us();
  const Decision allowed = run(loop(), limiter.try_acquire("user-1", 4));
  EXPECT_TRUE(allowed.allowed);
  EXPECT_EQ(allowed.limit, 10);
  EXPECT_EQ(allowed.remaining, 6);
  EXPECT_EQ(allowed.retry_after, 0us);
  EXPECT_EQ(allowed.reset_after, 400'000us);
  EXPECT_EQ(allowed.waited, 0us);
  EXPECT_GE(allowed.server_time_us, before - 1'000'000);  // the server's clock, not ours
  EXPECT_LE(allowed.server_time_us, wall_clock_us() + 1'000'000);
  EXPECT_EQ(allowed.binding, 0u);
  EXPECT_EQ(allowed.source, Source::redis);
  EXPECT_EQ(allowed.server_time().time_since_epoch(),
            std::chrono::microseconds(allowed.server_time_us));
  const Decision denied = run(loop(), limiter.try_acquire("user-1", 7));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 6);
  EXPECT_GT(denied.retry_after, 0us);
  EXPECT_LE(denied.retry_after, 100'000us);
}

TEST_F(LimiterTest, EveryAlgorithmAdmitsItsLimitThenDenies) {
  for (const Algorithm algorithm : all_algorithms) {
    Limiter limiter(client(), one(algorithm, {5, 10s}),
                    {.name = std::string(to_string(algorithm))});
    int admitted = 0;
    while (run(loop(), limiter.try_acquire("k")).allowed)
      ++admitted;
    EXPECT_EQ(admitted, algorithm == Algorithm::leaky_bucket ? 1 : 5) << to_string(algorithm);
  }
}

TEST_F(LimiterTest, KeysFollowTheDocumentedFormat) {
  Policy policy = one(Algorithm::gcra, {10, 1s});
  policy.limits.push_back(Limit{Algorithm::fixed_window, {1000, 24h}, 0, Window::aligned});
  Limiter limiter(client(), policy, {.name = "sms", .prefix = "app1"});
  run(loop(), limiter.try_acquire("tenant:{42}"));
  std::vector<std::string> keys = server_.keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"app1:{sms:tenant%3A%7B42%7D}:fixed_window:1",
                                            "app1:{sms:tenant%3A%7B42%7D}:gcra:0"}));
}

TEST_F(LimiterTest, EveryWrittenKeyLivesExactlyAsLongAsItsStateMatters) {
  for (const Algorithm algorithm : all_algorithms) {
    Limiter limiter(client(), one(algorithm, {4, 20s}),
                    {.name = std::string(to_string(algorithm))});
    const Decision d = run(loop(), limiter.try_acquire("k"));
    const std::string key = "rl:{" + std::string(to_string(algorithm)) +
                            ":k}:" + std::string(to_string(algorithm)) + ":0";
    const long long pttl = server_.integer({"PTTL", key});
    // The state matters for reset_after (gcra: 5 s, windows: up to the window's end).
    const long long expected_ms = (d.reset_after.count() + 999) / 1000;
    EXPECT_LE(pttl, expected_ms) << to_string(algorithm);
    EXPECT_GE(pttl, expected_ms - 100) << to_string(algorithm);
  }
}

TEST_F(LimiterTest, ADeniedRequestChangesNothingInRedis) {
  for (const Algorithm algorithm : all_algorithms) {
    Limiter limiter(client(), one(algorithm, {3, 30s}),
                    {.name = std::string(to_string(algorithm))});
    while (run(loop(), limiter.try_acquire("k")).allowed) {
    }
    const std::string key = "rl:{" + std::string(to_string(algorithm)) +
                            ":k}:" + std::string(to_string(algorithm)) + ":0";
    const Reply before = server_.command({"DUMP", key});
    for (int i = 0; i < 5; ++i)
      EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed);
    EXPECT_EQ(server_.command({"DUMP", key}).str, before.str) << to_string(algorithm);
  }
}

TEST_F(LimiterTest, APolicyOfSeveralLimitsIsAllOrNothing) {
  // Why a permit back every 500 ms: the twelve calls up to the first refusal must all come
  // before one, even on a busy machine.
  Policy policy = one(Algorithm::gcra, {10, 5s});
  policy.limits.push_back(Limit{Algorithm::fixed_window, {12, 24h}, 0, Window::aligned});
  Limiter limiter(client(), policy, {.name = "api"});
  int admitted = 0;
  while (run(loop(), limiter.try_acquire("k")).allowed)
    ++admitted;
  EXPECT_EQ(admitted, 10);
  const Decision per_second = run(loop(), limiter.try_acquire("k"));
  EXPECT_EQ(per_second.binding, 0u);
  EXPECT_EQ(per_second.limit, 10);
  run(loop(), sleep_for(loop(), 1600ms));  // gcra refills 3; the daily window has room for 2
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  const std::string gcra_before = server_.command({"DUMP", "rl:{api:k}:gcra:0"}).str;
  for (int i = 0; i < 3; ++i) {
    const Decision per_day = run(loop(), limiter.try_acquire("k"));
    EXPECT_FALSE(per_day.allowed);
    EXPECT_EQ(per_day.binding, 1u);
    EXPECT_EQ(per_day.limit, 12);
  }
  // The gcra limit allowed those requests on its own, but none was counted.
  EXPECT_EQ(server_.command({"DUMP", "rl:{api:k}:gcra:0"}).str, gcra_before);
}

TEST_F(LimiterTest, PeekReadsWithoutWritingAndResetForgets) {
  Limiter limiter(client(), one(Algorithm::token_bucket, {3, 1min}), {.name = "x"});
  EXPECT_EQ(run(loop(), limiter.peek("k")).remaining, 3);
  EXPECT_TRUE(server_.keys().empty()) << "peek wrote a key";
  run(loop(), limiter.try_acquire("k", 3));
  EXPECT_FALSE(run(loop(), limiter.peek("k")).allowed);
  run(loop(), limiter.reset("k"));
  // Only the reset's mark is left, which a give-back of a take before it reads (lua/reset.lua).
  EXPECT_EQ(server_.keys(), std::vector<std::string>{"rl:{x:k}:reset"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 3)).allowed);
}

TEST_F(LimiterTest, PeekReportsTheStateNowAndConsumesNothing) {
  for (const Algorithm algorithm : all_algorithms) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    // Why a minute: an aligned window that ended between the take and the peek would be full.
    Limiter limiter(client(), one(algorithm, {10, 1min}), {.name = "peek"});
    const std::string key = "fresh-" + std::to_string(static_cast<int>(algorithm));
    // A fresh key is full and idle: nothing to wait for, nothing until full again.
    const Decision fresh = run(loop(), limiter.peek(key));
    EXPECT_TRUE(fresh.allowed);
    EXPECT_EQ(fresh.remaining, 10);
    EXPECT_EQ(fresh.retry_after, 0us);
    EXPECT_EQ(fresh.reset_after, 0us);
    // An exhausted key: nothing available now, a wait for one permit, and the time until full.
    ASSERT_TRUE(run(loop(), limiter.try_acquire(key, 10)).allowed);
    const Decision exhausted = run(loop(), limiter.peek(key));
    EXPECT_FALSE(exhausted.allowed);
    EXPECT_EQ(exhausted.remaining, 0);
    EXPECT_GT(exhausted.retry_after, 0us);
    EXPECT_GE(exhausted.reset_after, exhausted.retry_after);
  }
}

TEST_F(LimiterTest, InvalidInputFailsBeforeAnyIo) {
  Limiter limiter(client(), one(Algorithm::gcra, {5, 1s}), {.name = "x"});
  run(loop(), limiter.try_acquire("warm-up"));
  const long long scripts_before = server_.script_calls();
  EXPECT_THROW(run(loop(), limiter.try_acquire("")), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", 0)), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", -3)), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", 6)), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire(std::string(70'000, 'k'))), InvalidArgument);
  EXPECT_EQ(server_.script_calls(), scripts_before);
  EXPECT_THROW(limiter.set_policy(Policy{}), InvalidArgument);
  EXPECT_EQ(limiter.policy().limits.size(), 1u) << "a rejected policy leaves the old one";
}

TEST_F(LimiterTest, InvalidInputIsReportedEvenWhenRedisIsUnreachable) {
  Client unreachable(loop(), {.url = "redis://127.0.0.1:" + std::to_string(test::free_port())});
  Limiter limiter(unreachable, one(Algorithm::gcra, {5, 1s}), {.name = "x"});
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", 9)), InvalidArgument);
  run(loop(), unreachable.close());
}

Task<void> peek_into(Limiter& limiter, Decision& out) {
  out = co_await limiter.peek("k");
}

Task<void> take_into(Limiter& limiter, std::int64_t permits, Decision& out) {
  out = co_await limiter.try_acquire("k", permits);
}

// Issue 33, bug 3: the first call met NOSCRIPT (its script not loaded yet) and was sent again as
// EVAL after the calls pipelined behind it, which had been decided first.
TEST_F(LimiterTest, CallsQueuedTogetherAreDecidedInTheirOrderWhenOneScriptIsNotLoadedYet) {
  ClientOptions options;
  options.url = server_.url();
  options.max_batch = 1;
  Client unbatched(loop(), options);
  Limiter limiter(unbatched, one(Algorithm::gcra, {10, 1h}), {.name = "order"});
  run(loop(), limiter.try_acquire("other"));  // loads the script of try_acquire, not of peek
  Decision peeked;
  Decision first;
  Decision second;
  auto in_one_turn = [](Limiter& target, Decision& p, Decision& a, Decision& b) -> Task<void> {
    TaskGroup group;
    group.add(peek_into(target, p));
    group.add(take_into(target, 4, a));
    group.add(take_into(target, 6, b));
    co_await group.join();
  };
  run(loop(), in_one_turn(limiter, peeked, first, second));
  EXPECT_EQ(peeked.remaining, 10) << "the peek answered the state after the takes behind it";
  EXPECT_EQ(first.remaining, 6);
  EXPECT_EQ(second.remaining, 0);
  run(loop(), unbatched.close());
}

TEST_F(LimiterTest, SetPolicyCarriesStateOverWithoutFreeingPermits) {
  Limiter limiter(client(), one(Algorithm::fixed_window, {5, 1h}), {.name = "x"});
  run(loop(), limiter.try_acquire("k", 5));
  limiter.set_policy(one(Algorithm::fixed_window, {8, 1h}));
  int admitted = 0;
  while (run(loop(), limiter.try_acquire("k")).allowed)
    ++admitted;
  EXPECT_EQ(admitted, 3) << "the window's count carries over to the new limit";
  limiter.set_policy(one(Algorithm::fixed_window, {8, 24h}));  // a longer period
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed);
}

TEST_F(LimiterTest, LongAndOddKeysAreEncodedNotRejected) {
  Limiter limiter(client(), one(Algorithm::gcra, {5, 1s}), {.name = "x"});
  const std::string long_key(1000, 'q');
  EXPECT_TRUE(run(loop(), limiter.try_acquire(long_key)).allowed);
  EXPECT_TRUE(run(loop(), limiter.try_acquire(std::string("nul\0and{braces}", 15))).allowed);
  for (const std::string& key : server_.keys())
    EXPECT_LT(key.size(), 100u) << key;
}

/// What a call on `limiter` ends with: "allowed", "denied (<source>)" or the error's message.
std::string outcome_of(uv_loop_t* loop, Limiter& limiter) {
  try {
    const Decision d = run(loop, limiter.try_acquire("k"));
    return d.allowed ? "allowed" : "denied (" + std::string(to_string(d.source)) + ")";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(LimiterOwnership, ALimiterKeepsTheClientsConnectionsAliveAndBothMove) {
  test::RedisServer server;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    std::optional<Limiter> limiter;
    {
      Client client(&loop, {.url = server.url()});
      Limiter made(client, one(Algorithm::gcra, {10, 1s}), {.name = "owned"});
      limiter.emplace(std::move(made));
      EXPECT_EQ(outcome_of(&loop, *limiter), "allowed");
      Client moved = std::move(client);
      EXPECT_EQ(outcome_of(&loop, *limiter), "allowed") << "the connections moved, not ended";
      run(&loop, moved.close());
    }
    // Both Client objects are gone: the limiter still holds what they shared (this was a
    // use-after-free), and its calls end the way calls on a closed client do.
    EXPECT_NE(outcome_of(&loop, *limiter), "allowed");
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace redlimit

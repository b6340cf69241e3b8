// Limiter::refund, penalize and block, and acquire_all: giving permits back, taking them
// without asking, denying until a time, and waiting for several keys at once. The scripts'
// exact arithmetic is the differential test's (every algorithm against its model); here, what
// a caller sees.
#include <gtest/gtest.h>

#include <stop_token>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class AdjustTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "every key expires";
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  /// The limiter's remaining permits for `key` now (a peek).
  std::int64_t remaining(Limiter& limiter, const std::string& key) {
    return run(loop(), limiter.peek(key)).remaining;
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

/// A fixed window of `permits` a minute, anchored at its first request, so that a test never
/// crosses a window's end.
Limit minute_window(std::int64_t permits) {
  Limit limit = Limit::fixed_window({permits, 60s});
  limit.window = Window::anchored;
  return limit;
}

/// Added to a wait for the end of a block: a uv timer counts whole milliseconds.
constexpr auto slack = 2ms;

/// The error `task` ends with, as "<type>: <message>", or "no error".
std::string error_of(uv_loop_t* loop, Task<void> task) {
  try {
    run(loop, std::move(task));
    return "no error";
  } catch (const AdjustmentRefused& e) {
    return std::string("AdjustmentRefused: ") + e.what();
  } catch (const InvalidArgument& e) {
    return std::string("InvalidArgument: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
}

/// Requests a stop of `source` after `delay`. Why a function, not a lambda: a coroutine lambda's
/// captures die with its closure, before the coroutine ends.
Task<void> stop_after(uv_loop_t* loop, std::chrono::milliseconds delay, std::stop_source* source) {
  co_await sleep_for(loop, delay);
  source->request_stop();
}

class BucketRefund : public AdjustTest, public ::testing::WithParamInterface<Algorithm> {};

TEST_P(BucketRefund, GivesPermitsBackButNeverBeyondTheCapacity) {
  Limiter limiter(client(), Policy::of(Limit{GetParam(), {10, 10s}}), {.name = "refund"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 10)).allowed);
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k", 3)).allowed);
  run(loop(), limiter.refund("k", 3));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 3)).allowed) << "the 3 refunded are there";
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k", 1)).allowed) << "and no more";
  run(loop(), limiter.refund("k", 10));
  run(loop(), limiter.refund("k", 10));
  EXPECT_EQ(remaining(limiter, "k"), 10) << "full, not 20";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BucketRefund,
                         ::testing::Values(Algorithm::gcra, Algorithm::token_bucket),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_F(AdjustTest, ALeakyBucketRefundLetsTheNextPermitLeaveNow) {
  Limiter limiter(client(), Policy::of(Limit::leaky_bucket({1, 10s})), {.name = "leaky"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed) << "the next leaves in 10 s";
  run(loop(), limiter.refund("k", 1));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
}

TEST_F(AdjustTest, AWindowRefundsOnlyWhatItsCurrentWindowHoldsAndAllLimitsOrNone) {
  Limiter limiter(client(), Policy{Limit::gcra({10, 10s}), minute_window(5)}, {.name = "windows"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 3)).allowed);
  run(loop(), limiter.refund("k", 2));
  EXPECT_EQ(remaining(limiter, "k"), 4) << "the window holds 1 of 5";
  const std::string error = error_of(loop(), limiter.refund("k", 2));
  EXPECT_TRUE(error.starts_with("AdjustmentRefused: refund of ")) << error;
  EXPECT_NE(error.find("fixed_window"), std::string::npos) << error;
  EXPECT_NE(error.find("past window"), std::string::npos) << error;
  const auto states = run(loop(), limiter.inspect("k"));
  EXPECT_EQ(states[0].state.remaining, 9) << "the gcra limit was not refunded either";
  EXPECT_EQ(states[1].state.remaining, 4);
}

TEST_F(AdjustTest, ASlidingLogRefundsFromItsWindow) {
  Limiter limiter(client(), Policy::of(Limit::sliding_window_log({5, 60s})), {.name = "log"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 5)).allowed);
  run(loop(), limiter.refund("k", 2));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 2)).allowed);
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k", 1)).allowed);
  run(loop(), limiter.refund("k", 5));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 5)).allowed) << "the names stay distinct";
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k", 1)).allowed);
  EXPECT_TRUE(error_of(loop(), limiter.refund("fresh", 1)).starts_with("AdjustmentRefused: "))
      << "an empty window holds nothing to give back";
}

TEST_F(AdjustTest, APenaltyBeyondTheCapacityIsADebtPaidAtTheRate) {
  // 10 per second: one permit every 100 ms. Two penalties of 10 leave a debt of 10 permits:
  // the next permit passes after the debt (1 s) and its own interval (100 ms), counted from the
  // first penalty: retry_after plus the time since it is 1.1 s.
  for (const Algorithm algorithm : {Algorithm::gcra, Algorithm::token_bucket}) {
    Limiter limiter(client(), Policy::of(Limit{algorithm, {10, 1s}}),
                    {.name = std::string("penalty-") + std::string(to_string(algorithm))});
    const auto before = Clock::now();
    run(loop(), limiter.penalize("k", 10));
    run(loop(), limiter.penalize("k", 10));
    const Decision denied = run(loop(), limiter.try_acquire("k"));
    const auto since = Clock::now() - before;
    EXPECT_FALSE(denied.allowed) << to_string(algorithm);
    EXPECT_GE(denied.retry_after + since, 1099ms) << to_string(algorithm);
    EXPECT_LE(denied.retry_after, 1100ms) << to_string(algorithm);
  }
}

TEST_F(AdjustTest, AWindowPenaltyFillsItsCurrentWindow) {
  Limiter limiter(client(), Policy::of(minute_window(5)), {.name = "penalty-w"});
  run(loop(), limiter.penalize("k", 5));
  run(loop(), limiter.penalize("k", 5));
  const Decision denied = run(loop(), limiter.try_acquire("k"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 0);
  EXPECT_EQ(denied.retry_after, denied.reset_after) << "until the window ends";
}

TEST_F(AdjustTest, ABlockDeniesUntilItsEndThenTheKeyStartsEmpty) {
  Limiter limiter(client(), Policy::of(Limit::gcra({10, 1s})), {.name = "blocked"});
  const auto before = Clock::now();
  run(loop(), limiter.block("k", 300ms));
  const Decision denied = run(loop(), limiter.try_acquire("k"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_GE(denied.retry_after + (Clock::now() - before), 299ms) << "until the block's end";
  EXPECT_LE(denied.retry_after, 300ms);
  run(loop(), sleep_for(loop(), denied.retry_after + slack));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed) << "the block ended";
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed) << "and the key started empty";
  run(loop(), limiter.block("k", 1us));
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed) << "a shorter block changes nothing";
}

TEST_F(AdjustTest, ASlidingLogBlockWithinItsWindowIsExactAndTheDenyCacheHonoursIt) {
  Limiter limiter(client(), Policy::of(Limit::sliding_window_log({5, 1s})), {.name = "log-b"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  const auto before = Clock::now();
  run(loop(), limiter.block("k", 400ms));
  const Decision denied = run(loop(), limiter.try_acquire("k"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.source, Source::redis);
  EXPECT_GE(denied.retry_after + (Clock::now() - before), 399ms) << "until the block's end";
  EXPECT_LE(denied.retry_after, 400ms);
  const Decision cached = run(loop(), limiter.try_acquire("k"));
  EXPECT_FALSE(cached.allowed);
  EXPECT_EQ(cached.source, Source::deny_cache) << "the block's denial is remembered";
  run(loop(), sleep_for(loop(), denied.retry_after + slack));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 4)).allowed)
      << "the block's permits left; the first permit still counts";
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed);
}

TEST_F(AdjustTest, ARefundClearsTheDenyCache) {
  Limiter limiter(client(), Policy::of(minute_window(3)), {.name = "cached"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 3)).allowed);
  EXPECT_EQ(run(loop(), limiter.try_acquire("k")).source, Source::redis);
  EXPECT_EQ(run(loop(), limiter.try_acquire("k")).source, Source::deny_cache);
  run(loop(), limiter.refund("k", 1));
  const Decision after = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(after.allowed) << "not the remembered denial";
  EXPECT_EQ(after.source, Source::redis);
}

TEST_F(AdjustTest, BadInputIsRefusedBeforeAnyIo) {
  Client unreachable(loop(), {.url = "redis://127.0.0.1:" + std::to_string(test::free_port())});
  Limiter windows(unreachable, Policy::of(Limit::fixed_window({5, 1s})), {.name = "w"});
  Limiter counter(unreachable, Policy::of(Limit::sliding_window_counter({5, 1s})), {.name = "c"});
  Limiter log(unreachable, Policy::of(Limit::sliding_window_log({5, 1s})), {.name = "l"});
  Limiter gcra(unreachable, Policy::of(Limit::gcra({5, 1s})), {.name = "g"});
  EXPECT_TRUE(error_of(loop(), windows.block("k", 1s)).starts_with("AdjustmentRefused: "));
  EXPECT_TRUE(error_of(loop(), counter.block("k", 1s)).starts_with("AdjustmentRefused: "));
  EXPECT_TRUE(error_of(loop(), log.block("k", 2s)).starts_with("AdjustmentRefused: "))
      << "longer than its window";
  EXPECT_TRUE(error_of(loop(), gcra.block("k", 0us)).starts_with("InvalidArgument: "));
  EXPECT_TRUE(error_of(loop(), gcra.block("k", -1s)).starts_with("InvalidArgument: "));
  EXPECT_TRUE(error_of(loop(), gcra.block("k", 24h * 365 * 5)).starts_with("InvalidArgument: "));
  EXPECT_TRUE(error_of(loop(), gcra.refund("k", 0)).starts_with("InvalidArgument: "));
  EXPECT_TRUE(error_of(loop(), gcra.refund("k", 6)).starts_with("InvalidArgument: "))
      << "beyond the capacity";
  EXPECT_TRUE(error_of(loop(), gcra.penalize("k", -1)).starts_with("InvalidArgument: "));
  EXPECT_TRUE(error_of(loop(), gcra.penalize("", 1)).starts_with("InvalidArgument: "));
  run(loop(), unreachable.close());
}

TEST_F(AdjustTest, InProcessLimitersRefundPenalizeAndBlockAlike) {
  Limiter limiter(loop(), Policy::of(Limit::gcra({10, 1s})), {.name = "local"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 10)).allowed);
  run(loop(), limiter.refund("k", 4));
  EXPECT_EQ(remaining(limiter, "k"), 4);
  run(loop(), limiter.penalize("k", 10));
  const Decision denied = run(loop(), limiter.try_acquire("k"));
  EXPECT_GT(denied.retry_after, 500ms) << "a debt of 6 permits, paid at 100 ms each";
  Limiter windows(loop(), Policy::of(minute_window(5)), {.name = "local-w"});
  EXPECT_TRUE(error_of(loop(), windows.refund("k", 1)).starts_with("AdjustmentRefused: "));
  Limiter blocked(loop(), Policy::of(Limit::token_bucket({10, 1s})), {.name = "local-b"});
  run(loop(), blocked.block("k", 200ms));
  const Decision during = run(loop(), blocked.try_acquire("k"));
  EXPECT_FALSE(during.allowed);
  EXPECT_GT(during.retry_after, 100ms);
  EXPECT_LE(during.retry_after, 200ms);
}

TEST_F(AdjustTest, AcquireAllWaitsForTheLongestOfItsClaims) {
  Limiter fast(client(), Policy::of(Limit::gcra({1, 100ms})), {.name = "fast"});
  Limiter slow(client(), Policy::of(Limit::gcra({1, 300ms})), {.name = "slow"});
  std::vector<Claim> claims{{&fast, "k"}, {&slow, "k"}};
  const auto before = Clock::now();
  EXPECT_TRUE(run(loop(), try_acquire_all(claims)).allowed);
  const Decision waited = run(loop(), acquire_all(claims, {.max_wait = 2s}));
  EXPECT_TRUE(waited.allowed);
  EXPECT_GE(Clock::now() - before, 299ms) << "the slow claim's 300 ms since the first take";
  const Decision refused = run(loop(), acquire_all(claims, {.max_wait = 50ms}));
  EXPECT_FALSE(refused.allowed) << "longer than max_wait: a denial at once";
  EXPECT_EQ(refused.claim, 1u);
  EXPECT_LT(refused.waited, 50ms);
  std::stop_source source;
  const auto started = std::chrono::steady_clock::now();
  bool cancelled = false;
  run(loop(), [&]() -> Task<void> {
    TaskGroup stopper;
    stopper.add(stop_after(loop(), 20ms, &source));
    try {
      co_await acquire_all(claims, {.stop = source.get_token()});
    } catch (const Cancelled&) {
      cancelled = true;
    }
    co_await stopper.join();
  }());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 250ms) << "ended by the stop, not the wait";
  EXPECT_TRUE(cancelled);
}

}  // namespace
}  // namespace redlimit

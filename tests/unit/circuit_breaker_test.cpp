// The circuit breaker that keeps calls from each waiting a full timeout while Redis is down.
#include "redis/circuit_breaker.hpp"

#include <gtest/gtest.h>

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;
using Clock = CircuitBreaker::Clock;

CircuitBreaker breaker() {
  return CircuitBreaker(
      {.failures_to_open = 3, .open_min = 50ms, .open_max = 200ms, .probe_timeout = 1s});
}

TEST(CircuitBreaker, OpensAfterConsecutiveFailuresOnly) {
  CircuitBreaker b = breaker();
  const auto t = Clock::now();
  b.failure(t);
  b.failure(t);
  b.success();
  b.failure(t);
  b.failure(t);
  EXPECT_TRUE(b.allow(t)) << "a success in between starts the count again";
  b.failure(t);
  EXPECT_FALSE(b.allow(t));
  EXPECT_EQ(b.retry_in(t), 50ms);
}

TEST(CircuitBreaker, LetsOneProbeThroughWhenTheOpenPeriodEnds) {
  CircuitBreaker b = breaker();
  const auto t = Clock::now();
  for (int i = 0; i < 3; ++i)
    b.failure(t);
  EXPECT_FALSE(b.allow(t + 49ms));
  EXPECT_TRUE(b.allow(t + 50ms)) << "the probe";
  EXPECT_FALSE(b.allow(t + 51ms)) << "only the probe, while it is under way";
  b.success();
  EXPECT_TRUE(b.allow(t + 52ms));
  EXPECT_FALSE(b.open());
}

TEST(CircuitBreaker, AFailedProbeOpensItForTwiceAsLongUpToTheMaximum) {
  CircuitBreaker b = breaker();
  auto t = Clock::now();
  for (int i = 0; i < 3; ++i)
    b.failure(t);
  for (const auto expected : {100ms, 200ms, 200ms}) {
    t += b.retry_in(t);
    ASSERT_TRUE(b.allow(t));
    b.failure(t);
    EXPECT_EQ(b.retry_in(t), expected);
  }
}

TEST(CircuitBreaker, AProbeThatNeverReportsIsReplacedAfterTheProbeTimeout) {
  CircuitBreaker b = breaker();
  const auto t = Clock::now();
  for (int i = 0; i < 3; ++i)
    b.failure(t);
  ASSERT_TRUE(b.allow(t + 50ms));  // this probe's task is destroyed before it reports
  EXPECT_FALSE(b.allow(t + 50ms + 999ms));
  EXPECT_TRUE(b.allow(t + 50ms + 1s)) << "a new probe";
  EXPECT_FALSE(b.allow(t + 50ms + 1s + 1ms));
}

}  // namespace
}  // namespace redlimit::detail

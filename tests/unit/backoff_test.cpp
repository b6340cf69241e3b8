#include "redis/backoff.hpp"

#include <gtest/gtest.h>

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, DelaysStayBetweenMinAndMax) {
  Backoff backoff(50ms, 2000ms, 1);
  for (int i = 0; i < 200; ++i) {
    const auto delay = backoff.next();
    EXPECT_GE(delay, 50ms);
    EXPECT_LE(delay, 2000ms);
  }
}

TEST(Backoff, GrowsExponentiallyUpToTheCap) {
  Backoff backoff(50ms, 2000ms, 7);
  // The n-th failure waits within [cap/2, cap], cap = min(max, min * 2^n).
  const std::chrono::milliseconds caps[] = {50ms,  100ms,  200ms,  400ms,
                                            800ms, 1600ms, 2000ms, 2000ms};
  for (const auto cap : caps) {
    const auto delay = backoff.next();
    EXPECT_GE(delay, std::max(50ms, cap / 2));
    EXPECT_LE(delay, cap);
  }
}

TEST(Backoff, JitterSpreadsClientsApart) {
  Backoff a(50ms, 2000ms, 1);
  Backoff b(50ms, 2000ms, 2);
  int different = 0;
  for (int i = 0; i < 10; ++i)
    different += a.next() != b.next() ? 1 : 0;
  EXPECT_GE(different, 5);
}

TEST(Backoff, ResetStartsAgainFromTheMinimum) {
  Backoff backoff(50ms, 2000ms, 3);
  for (int i = 0; i < 10; ++i)
    backoff.next();
  backoff.reset();
  EXPECT_EQ(backoff.failures(), 0);
  EXPECT_EQ(backoff.next(), 50ms);
}

}  // namespace
}  // namespace redlimit::detail

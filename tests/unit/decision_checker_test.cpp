#include "support/decision_checker.hpp"

#include <gtest/gtest.h>

namespace redlimit::test {
namespace {

using namespace std::chrono_literals;

Limit limit(Algorithm algorithm, Rate rate, std::int64_t burst = 0,
            Window window = Window::aligned) {
  return Limit{algorithm, rate, burst, window};
}

TEST(DecisionChecker, AcceptsAnExactGcraScheduleAndFindsTheSmallestViolatingWindow) {
  const Limit ten_per_second = limit(Algorithm::gcra, {10, 1s}, 2);
  // The burst of 2, then one every 100 ms; a second burst once the bucket refilled.
  std::vector<Admit> admits = {{0, 1},       {0, 1},       {100'000, 1},
                               {200'000, 1}, {300'000, 1}, {1'000'000, 2}};
  EXPECT_TRUE(check_admits(ten_per_second, admits));
  admits.push_back({1'050'000, 1});  // one too soon: 3 in [1000, 1050] ms, 2 + 0.5 allowed
  const CheckResult result = check_admits(ten_per_second, admits);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.window_start_us, 1'000'000);
  EXPECT_EQ(result.window_end_us, 1'050'000);
  EXPECT_EQ(result.admitted, 3);
  EXPECT_EQ(result.allowed, 2);
  EXPECT_NE(result.description.find("burst + rate"), std::string::npos);
}

TEST(DecisionChecker, FindsALeakyBucketDepartureThatCameTooSoon) {
  const Limit four_per_second = limit(Algorithm::leaky_bucket, {4, 1s});
  EXPECT_TRUE(check_admits(four_per_second, {{0, 1}, {250'000, 2}, {750'000, 1}}));
  EXPECT_FALSE(check_admits(four_per_second, {{0, 1}, {250'000, 2}, {749'999, 1}}));
}

TEST(DecisionChecker, ChecksAlignedAndAnchoredFixedWindows) {
  const Limit aligned = limit(Algorithm::fixed_window, {2, 1s});
  EXPECT_TRUE(check_admits(aligned, {{999'000, 2}, {1'000'000, 2}}));  // the legal edge burst
  EXPECT_FALSE(check_admits(aligned, {{1'000'000, 2}, {1'999'999, 1}}));
  const Limit anchored = limit(Algorithm::fixed_window, {2, 1s}, 0, Window::anchored);
  EXPECT_TRUE(check_admits(anchored, {{500'000, 2}, {1'500'000, 2}}));
  EXPECT_FALSE(check_admits(anchored, {{500'000, 2}, {1'400'000, 1}}));
}

TEST(DecisionChecker, ChecksEveryTrailingWindowOfTheSlidingLog) {
  const Limit log = limit(Algorithm::sliding_window_log, {3, 1s});
  EXPECT_TRUE(check_admits(log, {{0, 1}, {400'000, 1}, {800'000, 1}, {1'000'000, 1}}));
  const CheckResult result = check_admits(log, {{0, 1}, {400'000, 1}, {800'000, 1}, {999'999, 1}});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.window_end_us, 999'999);
  EXPECT_EQ(result.admitted, 4);
}

TEST(DecisionChecker, ReplaysTheSlidingCounterEstimate) {
  const Limit counter = limit(Algorithm::sliding_window_counter, {10, 1s});
  std::vector<Admit> admits = {{500'000, 10}, {1'300'000, 3}};
  EXPECT_TRUE(check_admits(counter, admits));
  admits.push_back({1'300'001, 1});  // 70% of 10 + 3 + 1 > 10
  EXPECT_FALSE(check_admits(counter, admits));
}

}  // namespace
}  // namespace redlimit::test

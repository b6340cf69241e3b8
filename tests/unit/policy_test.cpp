#include <gtest/gtest.h>

#include <string>

#include "policy/compiled_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

std::string error_of(Policy policy) {
  try {
    CompiledPolicy::compile(std::move(policy));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

Policy one(Algorithm algorithm, Rate rate, std::int64_t burst = 0) {
  return Policy::of(Limit{algorithm, rate, burst, Window::aligned});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PolicyValidation, AnUnknownAlgorithmValueIsInvalid) {
  EXPECT_TRUE(contains(error_of(one(static_cast<Algorithm>(6), {5, 1s})),
                       "policy.limits[0].algorithm is not one of the six algorithms"));
}

TEST(PolicyValidation, AnEmptyPolicyIsInvalid) {
  EXPECT_TRUE(contains(error_of(Policy{}), "policy.limits must hold at least one limit"));
}

TEST(PolicyValidation, RatesMustBePositiveAndBounded) {
  EXPECT_TRUE(contains(error_of(one(Algorithm::gcra, {0, 1s})),
                       "policy.limits[0].rate.permits must be in [1, 1000000000000], got 0"));
  EXPECT_TRUE(contains(error_of(one(Algorithm::gcra, {-5, 1s})), "rate.permits"));
  EXPECT_TRUE(contains(error_of(one(Algorithm::fixed_window, {5, 0s})),
                       "policy.limits[0].rate.period must be in [1, "));
  EXPECT_TRUE(contains(error_of(one(Algorithm::fixed_window, {5, -1s})), "rate.period"));
  EXPECT_TRUE(contains(error_of(one(Algorithm::fixed_window, {5, 24h * 400})), "rate.period"));
  EXPECT_TRUE(contains(error_of(one(Algorithm::gcra, {5, 1s}, -1)), "burst"));
}

TEST(PolicyValidation, ValuesThatWouldPassTwoToTheFiftyThirdInLuaAreRejected) {
  // 999,983 (prime) per day: burst x reduced period = 999983 x 86.4e9 > 2^52.
  const std::string error = error_of(one(Algorithm::gcra, {999'983, 24h}));
  EXPECT_TRUE(contains(error, "cannot be computed exactly")) << error;
  EXPECT_TRUE(contains(error, "2^52")) << error;
  // A rate that reduces well is fine: 1,000,000 per day is one per 86,400 us.
  EXPECT_EQ(error_of(one(Algorithm::gcra, {1'000'000, 24h})), "accepted");
  EXPECT_TRUE(
      contains(error_of(one(Algorithm::gcra, {1, 24h * 366}, 11)), "drains in more than 10 years"));
}

TEST(PolicyValidation, TheSlidingLogIsCappedAndPointsToTheCounter) {
  const std::string error = error_of(one(Algorithm::sliding_window_log, {10'001, 1s}));
  EXPECT_TRUE(contains(error, "at most 10000")) << error;
  EXPECT_TRUE(contains(error, "sliding_window_counter")) << error;
  EXPECT_EQ(error_of(one(Algorithm::sliding_window_log, {10'000, 1s})), "accepted");
}

TEST(PolicyValidation, PermitsAreCheckedAgainstEveryLimitsCapacity) {
  Policy policy;
  policy.limits.push_back(Limit{Algorithm::gcra, {10, 1s}, 20, Window::aligned});
  policy.limits.push_back(Limit{Algorithm::fixed_window, {15, 24h}, 0, Window::aligned});
  const auto compiled = CompiledPolicy::compile(policy);
  EXPECT_NO_THROW(compiled->check_permits(15));
  try {
    compiled->check_permits(16);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "permits (16) can never be granted")) << e.what();
    EXPECT_TRUE(contains(e.what(), "policy.limits[1] (fixed_window 15/1d) holds at most 15"))
        << e.what();
  }
  EXPECT_THROW(compiled->check_permits(0), InvalidArgument);
  EXPECT_THROW(compiled->check_permits(-1), InvalidArgument);
}

TEST(PolicyValidation, BucketRatesAreReducedToLowestTerms) {
  const auto compiled = CompiledPolicy::compile(one(Algorithm::gcra, {400, 1s}));
  const LimitSpec spec = compiled->specs().front();
  EXPECT_EQ(spec.a, 1);  // 400 per 1,000,000 us is 1 per 2,500 us
  EXPECT_EQ(spec.b, 2500);
  EXPECT_EQ(spec.c, 400);  // burst 0 means rate.permits
  EXPECT_EQ(compiled->limits().front().key_suffix, ":gcra:0");
}

}  // namespace
}  // namespace redlimit::detail

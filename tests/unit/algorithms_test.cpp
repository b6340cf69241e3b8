// The algorithm models as specifications. The differential test (tests/redis) shows the scripts
// decide exactly as these models do.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <vector>

#include "algorithms/exact.hpp"
#include "algorithms/policy_model.hpp"
#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

/// One key's state under a policy, driven with explicit times (microseconds).
class Model {
 public:
  explicit Model(Policy policy) : compiled_(CompiledPolicy::compile(std::move(policy))) {
    states_.resize(compiled_->specs().size());
  }
  explicit Model(Limit limit) : Model(Policy::of(limit)) {}

  PolicyOutcome acquire(std::int64_t now, std::int64_t permits = 1) {
    return decide_policy(compiled_->specs(), states_, now, permits, Mode::acquire);
  }
  PolicyOutcome peek(std::int64_t now) {
    return decide_policy(compiled_->specs(), states_, now, 1, Mode::peek);
  }
  /// Admits at `now` until denied; returns how many were admitted.
  int drain(std::int64_t now) {
    int admitted = 0;
    while (acquire(now).allowed)
      ++admitted;
    return admitted;
  }

 private:
  std::shared_ptr<const CompiledPolicy> compiled_;
  std::vector<std::optional<LimitState>> states_;
};

constexpr std::int64_t t0 = 1'800'000'000'000'000;  // a microsecond timestamp in 2027

Limit limit(Algorithm algorithm, Rate rate, std::int64_t burst = 0,
            Window window = Window::aligned) {
  return Limit{algorithm, rate, burst, window};
}

// ---- every algorithm

class EveryAlgorithm : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EveryAlgorithm, ADeniedRequestDoesNotConsume) {
  Model model(limit(GetParam(), {5, 1s}));
  model.drain(t0);
  const auto before = model.peek(t0 + 1);
  EXPECT_FALSE(model.acquire(t0 + 1).allowed);
  const auto after = model.peek(t0 + 1);
  EXPECT_EQ(after.binding_outcome().retry_after_us, before.binding_outcome().retry_after_us);
  EXPECT_EQ(after.binding_outcome().remaining, before.binding_outcome().remaining);
}

TEST_P(EveryAlgorithm, RetryAfterIsExactRoundedUpAndNeverZero) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t permits = std::uniform_int_distribution<std::int64_t>(1, 40)(random);
    const std::int64_t period = std::uniform_int_distribution<std::int64_t>(1, 5'000'000)(random);
    Model model(limit(GetParam(), {permits, std::chrono::microseconds(period)}));
    std::int64_t now = t0 + std::uniform_int_distribution<std::int64_t>(0, 10'000'000)(random);
    model.drain(now);
    const auto denied = model.acquire(now);
    ASSERT_FALSE(denied.allowed);
    const std::int64_t retry = denied.binding_outcome().retry_after_us;
    ASSERT_GT(retry, 0);
    EXPECT_FALSE(model.peek(now + retry - 1).allowed) << "not a microsecond too early";
    EXPECT_TRUE(model.peek(now + retry).allowed) << "and passes exactly then";
  }
}

TEST_P(EveryAlgorithm, PeekConsumesNothing) {
  Model model(limit(GetParam(), {3, 1s}));
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(model.peek(t0).allowed);
  EXPECT_EQ(model.drain(t0), GetParam() == Algorithm::leaky_bucket ? 1 : 3);
}

TEST_P(EveryAlgorithm, PeekReportsTheStateNow) {
  Model model(limit(GetParam(), {3, 1s}));
  // Fresh: every permit available, none to wait for, already full.
  const LimitOutcome fresh = model.peek(t0).binding_outcome();
  EXPECT_TRUE(fresh.allowed);
  EXPECT_EQ(fresh.remaining, 3);
  EXPECT_EQ(fresh.retry_after_us, 0);
  EXPECT_EQ(fresh.reset_after_us, 0);
  // After an acquire, peek at the same time sees the state that acquire left.
  const LimitOutcome taken = model.acquire(t0).binding_outcome();
  ASSERT_TRUE(taken.allowed);
  const LimitOutcome after = model.peek(t0).binding_outcome();
  EXPECT_EQ(after.remaining, taken.remaining);
  EXPECT_EQ(after.reset_after_us, taken.reset_after_us);
}

TEST_P(EveryAlgorithm, TheStateLivesExactlyUntilItStopsMattering) {
  Model model(limit(GetParam(), {4, 2s}));
  const auto first = model.acquire(t0);
  ASSERT_TRUE(first.allowed);
  const std::int64_t ttl = first.binding_outcome().ttl_us;
  EXPECT_GT(ttl, 0);
  // After the TTL the limit is idle: a fresh key decides the same.
  Model fresh(limit(GetParam(), {4, 2s}));
  EXPECT_EQ(model.peek(t0 + ttl).binding_outcome().remaining,
            fresh.peek(t0 + ttl).binding_outcome().remaining);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, EveryAlgorithm,
                         ::testing::Values(Algorithm::gcra, Algorithm::token_bucket,
                                           Algorithm::leaky_bucket, Algorithm::fixed_window,
                                           Algorithm::sliding_window_log,
                                           Algorithm::sliding_window_counter),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- gcra and token bucket

TEST(Gcra, AdmitsTheBurstThenExactlyTheRate) {
  Model model(limit(Algorithm::gcra, {10, 1s}, 5));
  EXPECT_EQ(model.drain(t0), 5);
  EXPECT_FALSE(model.acquire(t0 + 99'999).allowed);
  EXPECT_TRUE(model.acquire(t0 + 100'000).allowed);
}

/// With demand often enough that the bucket never overflows (burst >= 1 + step x rate), the
/// permits admitted by t0 + x are exactly burst + floor(x x rate): the exact arithmetic never
/// drifts, however odd the rate.
void expect_no_drift(Algorithm algorithm, Rate rate, std::int64_t burst, std::int64_t step_us,
                     int steps) {
  Model model(limit(algorithm, rate, burst));
  std::int64_t admitted = model.drain(t0);
  ASSERT_EQ(admitted, burst);
  for (int k = 1; k <= steps; ++k) {
    const std::int64_t x = k * step_us;
    admitted += model.drain(t0 + x);
    ASSERT_EQ(admitted, burst + static_cast<std::int64_t>(static_cast<Int128>(x) * rate.permits /
                                                          rate.period.count()))
        << "after " << x << " us";
  }
}

TEST(Gcra, NoDriftAtSevenPerThreeSeconds) {
  expect_no_drift(Algorithm::gcra, {7, 3s}, 7, 123'457, 30'000);  // an hour, in odd steps
}

TEST(Gcra, NoDriftAtAMillionPerSecond) {
  expect_no_drift(Algorithm::gcra, {1'000'000, 1s}, 1'000'000, 997, 2'000);
}

TEST(Gcra, NoDriftAtOnePerHour) {
  expect_no_drift(Algorithm::gcra, {1, 1h}, 2, 1'000'000'007, 200);  // about 55 hours
}

TEST(TokenBucket, NoDriftAtSevenPerThreeSecondsEither) {
  expect_no_drift(Algorithm::token_bucket, {7, 3s}, 7, 123'457, 30'000);
}

TEST(Gcra, OnePerHourWaitsExactlyAnHour) {
  Model model(limit(Algorithm::gcra, {1, 1h}));
  EXPECT_TRUE(model.acquire(t0).allowed);
  const auto denied = model.acquire(t0 + 1);
  EXPECT_EQ(denied.binding_outcome().retry_after_us, 3'600'000'000 - 1);
  EXPECT_TRUE(model.acquire(t0 + 3'600'000'000).allowed);
}

TEST(TokenBucket, RefillsContinuouslyUpToTheCapacity) {
  Model model(limit(Algorithm::token_bucket, {2, 1s}, 4));
  EXPECT_EQ(model.drain(t0), 4);
  EXPECT_EQ(model.drain(t0 + 1'000'000), 2);   // two tokens refilled in a second
  EXPECT_EQ(model.drain(t0 + 60'000'000), 4);  // never more than the capacity
}

TEST(TokenBucket, AClockStepBackwardsFreesNothing) {
  Model model(limit(Algorithm::token_bucket, {10, 1s}));
  EXPECT_EQ(model.drain(t0), 10);
  EXPECT_EQ(model.drain(t0 - 5'000'000), 0);
  // The refill time ahead of now was taken as now: the bucket refills from the step on.
  EXPECT_EQ(model.drain(t0 - 5'000'000 + 100'000), 1);
}

/// After the clock steps back within the stored window, that window still holds now: the
/// windows decide on it, and retry_after and the state's lifetime count from now to its end,
/// when they are really due.
TEST(EveryWindow, AClockStepBackWithinTheWindowCountsRetryAfterFromNow) {
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window_counter}) {
    Model model(limit(algorithm, {2, 1s}));
    model.drain(t0 + 500'000);
    const auto ahead = model.acquire(t0 + 500'000);
    const auto behind = model.acquire(t0 + 200'000);  // 300 ms back
    EXPECT_EQ(behind.binding_outcome().retry_after_us,
              ahead.binding_outcome().retry_after_us + 300'000)
        << to_string(algorithm);
    EXPECT_EQ(behind.binding_outcome().reset_after_us,
              ahead.binding_outcome().reset_after_us + 300'000)
        << to_string(algorithm);
  }
}

/// A log entry or a refill time ahead of now is a clock step back: it is taken as now, so
/// retry_after and the state's lifetime are what they were just before the step.
TEST(EveryWindow, AClockStepBackTakesTimesAheadOfNowAsNow) {
  for (const Algorithm algorithm : {Algorithm::sliding_window_log, Algorithm::token_bucket}) {
    Model model(limit(algorithm, {2, 1s}));
    model.drain(t0 + 500'000);
    const auto ahead = model.acquire(t0 + 500'000);
    const auto behind = model.acquire(t0 + 200'000);  // 300 ms back
    EXPECT_EQ(behind.binding_outcome().retry_after_us, ahead.binding_outcome().retry_after_us)
        << to_string(algorithm);
    EXPECT_EQ(behind.binding_outcome().reset_after_us, ahead.binding_outcome().reset_after_us)
        << to_string(algorithm);
  }
}

// ---- leaky bucket

TEST(LeakyBucket, SpacesDeparturesExactlyPeriodOverPermitsApart) {
  Model model(limit(Algorithm::leaky_bucket, {4, 1s}, 10));
  EXPECT_TRUE(model.acquire(t0).allowed);
  EXPECT_FALSE(model.acquire(t0 + 249'999).allowed);
  const auto denied = model.acquire(t0 + 100'000);
  EXPECT_EQ(denied.binding_outcome().retry_after_us, 150'000);
  EXPECT_TRUE(model.acquire(t0 + 250'000).allowed);
  // Three permits occupy three intervals.
  EXPECT_TRUE(model.acquire(t0 + 500'000, 3).allowed);
  EXPECT_FALSE(model.acquire(t0 + 1'249'999).allowed);
  EXPECT_TRUE(model.acquire(t0 + 1'250'000).allowed);
}

// ---- windows

TEST(FixedWindow, AlignedWindowsStartAtMultiplesOfThePeriod) {
  Model model(limit(Algorithm::fixed_window, {3, 1s}));
  const std::int64_t late = t0 + 900'000;  // 100 ms before a boundary
  EXPECT_EQ(model.drain(late), 3);
  EXPECT_EQ(model.acquire(late).binding_outcome().retry_after_us, 100'000);
  // The documented edge burst: 3 more right after the boundary, 6 within 200 ms.
  EXPECT_EQ(model.drain(t0 + 1'000'000), 3);
}

TEST(FixedWindow, AnchoredWindowsStartAtTheFirstRequest) {
  Model model(limit(Algorithm::fixed_window, {3, 1s}, 0, Window::anchored));
  const std::int64_t first = t0 + 900'000;
  EXPECT_EQ(model.drain(first), 3);
  EXPECT_EQ(model.drain(t0 + 1'000'000), 0);
  EXPECT_EQ(model.drain(first + 1'000'000), 3);
}

TEST(SlidingWindowLog, IsExactForEveryTrailingWindow) {
  Model model(limit(Algorithm::sliding_window_log, {3, 1s}));
  EXPECT_TRUE(model.acquire(t0).allowed);
  EXPECT_TRUE(model.acquire(t0 + 400'000).allowed);
  EXPECT_TRUE(model.acquire(t0 + 800'000).allowed);
  const auto denied = model.acquire(t0 + 900'000);
  EXPECT_EQ(denied.binding_outcome().retry_after_us, 100'000);  // when the first one leaves
  EXPECT_TRUE(model.acquire(t0 + 1'000'000).allowed);
  EXPECT_FALSE(model.acquire(t0 + 1'399'999).allowed);
}

TEST(SlidingWindowLog, TwoPermitsAtTheSameMicrosecondAreTwoEntries) {
  Model model(limit(Algorithm::sliding_window_log, {5, 1s}));
  EXPECT_TRUE(model.acquire(t0, 2).allowed);
  EXPECT_TRUE(model.acquire(t0, 2).allowed);
  EXPECT_EQ(model.peek(t0).binding_outcome().remaining, 1);  // peek: available now
  EXPECT_FALSE(model.acquire(t0, 2).allowed);
}

TEST(SlidingWindowCounter, WeightsThePreviousWindowByItsOverlap) {
  Model model(limit(Algorithm::sliding_window_counter, {10, 1s}));
  const std::int64_t window = t0;  // t0 is a multiple of 1 s
  EXPECT_EQ(model.drain(window + 500'000), 10);
  // 30% into the next window, 70% of the previous 10 still count: 3 more fit.
  EXPECT_EQ(model.drain(window + 1'300'000), 3);
}

// ---- policies

TEST(Policy, SeveralLimitsAreAllOrNothing) {
  Policy policy;
  policy.limits.push_back(limit(Algorithm::gcra, {10, 1s}));
  policy.limits.push_back(limit(Algorithm::fixed_window, {12, 24h}));
  Model model(policy);
  EXPECT_EQ(model.drain(t0), 10);
  EXPECT_EQ(model.acquire(t0).binding, 0u);
  const std::int64_t later = t0 + 1'000'000;
  EXPECT_EQ(model.drain(later), 2);  // the daily limit is used up
  for (int i = 0; i < 5; ++i) {
    const auto denied = model.acquire(later);
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.binding, 1u) << "the longest retry_after binds";
  }
  // The per-second limit allowed each of those, but none was counted: 8 are still there.
  EXPECT_EQ(model.peek(later).limits[0].remaining, 8);
}

TEST(Policy, AnAdmissionIsBoundByTheLimitWithFewestRemaining) {
  Policy policy;
  policy.limits.push_back(limit(Algorithm::gcra, {10, 1s}));
  policy.limits.push_back(limit(Algorithm::fixed_window, {5, 1min}));
  Model model(policy);
  const auto first = model.acquire(t0);
  EXPECT_EQ(first.binding, 1u);
  EXPECT_EQ(first.binding_outcome().remaining, 4);
}

}  // namespace
}  // namespace redlimit::detail

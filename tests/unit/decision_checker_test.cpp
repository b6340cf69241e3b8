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

TEST(DecisionChecker, MeasuresHowFarAGcraLimitWasExceededAtMost) {
  const Limit ten_per_second = limit(Algorithm::gcra, {10, 1s}, 2);
  std::vector<Admit> exact = {{0, 1}, {0, 1}, {100'000, 1}, {200'000, 1}, {1'000'000, 2}};
  EXPECT_EQ(largest_excess(ten_per_second, exact), 0);
  exact.push_back({1'050'000, 1});  // 3 in [1000, 1050] ms against 2.5
  EXPECT_EQ(largest_excess(ten_per_second, exact), 0) << "rounded down: half a permit";
  // Twice the rate for 1 s: 20 in [0, 950] ms against 2 + 9.5; check_admits names a window with
  // one too many, the excess is 8.
  std::vector<Admit> doubled;
  for (std::int64_t t = 0; t < 1'000'000; t += 50'000)
    doubled.push_back({t, 1});
  EXPECT_EQ(check_admits(ten_per_second, doubled).admitted -
                check_admits(ten_per_second, doubled).allowed,
            1);
  EXPECT_EQ(largest_excess(ten_per_second, doubled), 8);
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

// ---- the transition mode: one key's admissions across changes of its stored policy

constexpr std::int64_t second = 1'000'000;
constexpr std::int64_t minute = 60 * second;
constexpr std::int64_t hour = 60 * minute;
constexpr auto bound = 100ms;

Policy policy_of(const Limit& only) {
  Policy policy;
  policy.limits = {only};
  return policy;
}

/// `count` admissions of one permit each at `time_us` under `version`, appended to `admits`.
void admit(std::vector<VersionedAdmit>& admits, std::int64_t time_us, int count,
           std::int64_t version) {
  for (int k = 0; k < count; ++k)
    admits.push_back({time_us, 1, version});
}

/// Version 1 (`before`) from time 0, version 2 (`after`) stored at `since_us` with `carry`.
std::vector<PolicyVersion> one_change(const Limit& before, const Limit& after,
                                      std::int64_t since_us, Carry carry = Carry::as_is) {
  return {{1, policy_of(before), 0, Carry::as_is}, {2, policy_of(after), since_us, carry}};
}

TEST(TransitionChecker, FlagsTheWholeLimitComingBackAfterASlowerPolicy) {
  // Bug 1: 10/s exhausted, then 10/h; the key expired with the old TTL and 10 of 10 passed 2.2 s
  // later. Correct: the next permit comes when the new policy has one.
  for (const Algorithm algorithm :
       {Algorithm::token_bucket, Algorithm::fixed_window, Algorithm::sliding_window_log,
        Algorithm::sliding_window_counter}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    const auto history =
        one_change(limit(algorithm, {10, 1s}), limit(algorithm, {10, 1h}), second + 1'000);
    std::vector<VersionedAdmit> exhausted;
    admit(exhausted, second, 10, 1);
    std::vector<VersionedAdmit> came_back = exhausted;
    admit(came_back, 3 * second + 201'000, 10, 2);
    EXPECT_FALSE(check_transitions(history, came_back, bound));
    std::vector<VersionedAdmit> held = exhausted;
    const std::int64_t next_permit =
        algorithm == Algorithm::token_bucket ? second + 1'000 + 6 * minute : second + hour;
    admit(held, next_permit, 1, 2);
    EXPECT_TRUE(check_transitions(history, held, bound));
  }
}

TEST(TransitionChecker, FlagsAnExhaustedGcraThatLooksEmptyAfterTightening) {
  // Bug 2: 100/min exhausted, then 100/h, and 98 of 100 passed at once (gcra, leaky_bucket).
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::leaky_bucket, Algorithm::token_bucket}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    const auto history =
        one_change(limit(algorithm, {100, 1min}), limit(algorithm, {100, 1h}), second + 1'000);
    std::vector<VersionedAdmit> exhausted;
    admit(exhausted, second, 100, 1);
    std::vector<VersionedAdmit> at_once = exhausted;
    admit(at_once, second + 2'000, 98, 2);
    const CheckResult result = check_transitions(history, at_once, bound);
    ASSERT_FALSE(result);
    EXPECT_NE(result.description.find("version 2, limit #0"), std::string::npos);
    EXPECT_NE(result.description.find("carried"), std::string::npos);
    std::vector<VersionedAdmit> one_per_36_seconds = exhausted;
    admit(one_per_36_seconds, second + 1'000 + 36 * second, 1, 2);
    admit(one_per_36_seconds, second + 1'000 + 72 * second, 1, 2);
    EXPECT_TRUE(check_transitions(history, one_per_36_seconds, bound));
  }
}

TEST(TransitionChecker, FlagsAShrunkWindowThatDroppedItsCount) {
  // Bug 3: fixed_window 10/h exhausted, then 10/min, and 10 more passed at once.
  for (const Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window_counter}) {
    SCOPED_TRACE(static_cast<int>(algorithm));
    const auto history =
        one_change(limit(algorithm, {10, 1h}), limit(algorithm, {10, 1min}), 20 * second);
    std::vector<VersionedAdmit> exhausted;
    admit(exhausted, 10 * second, 10, 1);
    std::vector<VersionedAdmit> at_once = exhausted;
    admit(at_once, 21 * second, 10, 2);
    EXPECT_FALSE(check_transitions(history, at_once, bound));
    std::vector<VersionedAdmit> next_windows = exhausted;
    admit(next_windows, 2 * minute, 10, 2);
    EXPECT_TRUE(check_transitions(history, next_windows, bound));
  }
}

TEST(TransitionChecker, FlagsARefundRefilledAtTheOldRate) {
  // Bug 4: 1000/s, 1000 taken, acquire(1000) waiting, set_policy(1/h), cancel: ~500 permits.
  const auto history = one_change(limit(Algorithm::token_bucket, {1000, 1s}),
                                  limit(Algorithm::token_bucket, {1, 1h}), second + 500);
  std::vector<VersionedAdmit> taken;
  admit(taken, second, 1000, 1);
  std::vector<VersionedAdmit> created = taken;
  admit(created, second + 1'000, 500, 2);
  EXPECT_FALSE(check_transitions(history, created, bound));
  std::vector<VersionedAdmit> none_created = taken;
  admit(none_created, second + 500 + hour, 1, 2);
  EXPECT_TRUE(check_transitions(history, none_created, bound));
}

TEST(TransitionChecker, CarriesBucketPermitsAsTheCarrySays) {
  // 5 of 10 left at the change; the new capacity is 20.
  const Limit before = limit(Algorithm::gcra, {10, 1s}, 10);
  const Limit after = limit(Algorithm::gcra, {20, 1s}, 20);
  std::vector<VersionedAdmit> half;
  admit(half, second, 5, 1);
  for (const auto& [carry, carried] :
       {std::pair{Carry::as_is, 5}, std::pair{Carry::proportional, 10},
        std::pair{Carry::reset, 20}}) {
    SCOPED_TRACE(static_cast<int>(carry));
    const auto history = one_change(before, after, second + 1, carry);
    std::vector<VersionedAdmit> all = half;
    admit(all, second + 2, carried, 2);
    EXPECT_TRUE(check_transitions(history, all, bound));
    admit(all, second + 2, 1, 2);
    EXPECT_FALSE(check_transitions(history, all, bound));
  }
}

TEST(TransitionChecker, CarriesWindowCountsAsTheCarrySays) {
  // 5 of 10 counted in the window at the change; the new limit is 20 per minute.
  const Limit before = limit(Algorithm::fixed_window, {10, 1min});
  const Limit after = limit(Algorithm::fixed_window, {20, 1min});
  std::vector<VersionedAdmit> half;
  admit(half, second, 5, 1);
  for (const auto& [carry, left] : {std::pair{Carry::as_is, 15}, std::pair{Carry::proportional, 10},
                                    std::pair{Carry::reset, 20}}) {
    SCOPED_TRACE(static_cast<int>(carry));
    const auto history = one_change(before, after, 2 * second, carry);
    std::vector<VersionedAdmit> all = half;
    admit(all, 3 * second, left, 2);
    EXPECT_TRUE(check_transitions(history, all, bound));
    admit(all, 3 * second, 1, 2);
    EXPECT_FALSE(check_transitions(history, all, bound));
  }
}

TEST(TransitionChecker, AcceptsAnImplementationThatCountsOldAdmissionsMadeDuringPropagation) {
  // 5 of 10 left at the change to 5/s; a slow follower still takes 3 under version 1, and the
  // conversion at since includes them: 2 pass under version 2. Not counting them (5) also passes.
  const auto history =
      one_change(limit(Algorithm::gcra, {10, 1s}), limit(Algorithm::gcra, {5, 1s}), second + 1'000);
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 5, 1);
  admit(admits, second + 11'000, 3, 1);
  admit(admits, second + 21'000, 2, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, second + 21'000, 3, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, second + 21'000, 1, 2);
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, AcceptsOldAdmissionsThatMovedTheStoredWindowOnBeforeTheConversion) {
  // 10 of 10 in [1 s, 2 s) at the change to 10 per 10 s; a slow follower admits 3 more under
  // version 1 in [2 s, 3 s): the stored window is that one, and the conversion carries its 3.
  const auto history = one_change(limit(Algorithm::fixed_window, {10, 1s}),
                                  limit(Algorithm::fixed_window, {10, 10s}), 2 * second - 1'000);
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 10, 1);
  admit(admits, 2 * second + 1'000, 3, 1);
  admit(admits, 2 * second + 2'000, 7, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, ScalesASlidingCounterProportionally) {
  // 5 of 10 per minute counted at the change to 20 per minute, proportional: 10 count.
  const auto history = one_change(limit(Algorithm::sliding_window_counter, {10, 1min}),
                                  limit(Algorithm::sliding_window_counter, {20, 1min}), 10 * second,
                                  Carry::proportional);
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 5, 1);
  admit(admits, 11 * second, 10, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, 12 * second, 1, 2);
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, CarriesThroughAChainOfChanges) {
  // Exhausted at 10/s, tightened to 1/s, loosened to 100/s: each change starts from what the
  // one before left (nothing), so the first permit comes 10 ms after the loosening.
  const Limit loose = limit(Algorithm::gcra, {100, 1s});
  const std::vector<PolicyVersion> history = {
      {1, policy_of(limit(Algorithm::gcra, {10, 1s})), 0, Carry::as_is},
      {2, policy_of(limit(Algorithm::gcra, {1, 1s})), second + 1'000, Carry::as_is},
      {3, policy_of(loose), second + 2'000, Carry::as_is}};
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 10, 1);
  admit(admits, second + 12'000, 1, 3);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, second + 12'000, 1, 3);
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, ACarriedCountAboveALoweredLimitOnlyDenies) {
  // 30 counted in [0, 2 s), then 10 per 500 ms: the window holding the change admits nothing,
  // the next one its 10.
  const auto history = one_change(limit(Algorithm::fixed_window, {30, 2s}),
                                  limit(Algorithm::fixed_window, {10, 500ms}), 100'000);
  std::vector<VersionedAdmit> admits;
  admit(admits, 50'000, 30, 1);
  admit(admits, 500'000, 10, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, 499'999, 1, 2);
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, KeepsTheFractionOfAPermitAcrossAChange) {
  // Exhausted at 5/s, half a permit back at a change that keeps the policy (an override of
  // another key): the next permit is whole 100 ms later, not 200 ms.
  const Limit five_per_second = limit(Algorithm::gcra, {5, 1s}, 5);
  const auto history = one_change(five_per_second, five_per_second, 100'000);
  std::vector<VersionedAdmit> admits;
  admit(admits, 0, 5, 1);
  admit(admits, 200'000, 1, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admits.back().time_us = 199'999;
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, FlagsAnOldVersionUsedAfterThePropagationBound) {
  const auto history =
      one_change(limit(Algorithm::gcra, {10, 1s}), limit(Algorithm::gcra, {100, 1s}), second);
  std::vector<VersionedAdmit> admits;
  admit(admits, second + 100'000, 1, 1);  // exactly at since + bound: still allowed
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, second + 100'001, 1, 1);
  const CheckResult result = check_transitions(history, admits, bound);
  ASSERT_FALSE(result);
  EXPECT_NE(result.description.find("propagation bound"), std::string::npos);
}

TEST(TransitionChecker, FlagsVersionsGoingBackOrUsedBeforeTheyWereStored) {
  const auto history =
      one_change(limit(Algorithm::gcra, {10, 1s}), limit(Algorithm::gcra, {100, 1s}), second);
  EXPECT_FALSE(check_transitions(history, {{second + 1, 1, 2}, {second + 2, 1, 1}}, bound));
  EXPECT_FALSE(check_transitions(history, {{second - 1, 1, 2}}, bound));
  EXPECT_FALSE(check_transitions(history, {{second - 1, 1, 3}}, bound));
  EXPECT_TRUE(check_transitions(history, {{second + 1, 1, 1}, {second + 1, 1, 2}}, bound));
}

// Each limit's algorithm and position has its own state in Redis, stamped with the versions
// written to it: a process that has not heard of a change of algorithm yet still decides on the
// old algorithm's state after another decided on the new one's (policy_fleet's CI run, stop 54).
TEST(TransitionChecker, VersionsGoBackOnlyOnAnotherAlgorithmsState) {
  const std::vector<PolicyVersion> history = {
      {1, policy_of(limit(Algorithm::gcra, {5, 1s}, 5)), 0, Carry::as_is},
      {2, policy_of(limit(Algorithm::token_bucket, {30, 1s}, 15)), second, Carry::as_is},
      {3, policy_of(limit(Algorithm::gcra, {10, 1s}, 5)), second + 50'000, Carry::as_is}};
  EXPECT_TRUE(check_transitions(history, {{second + 10, 1, 2}, {second + 20, 1, 1}}, bound));
  // Every use within the propagation bound: only the order on gcra's state is wrong.
  const CheckResult result = check_transitions(
      history, {{second + 10, 1, 2}, {second + 50'010, 1, 3}, {second + 50'020, 1, 1}}, bound);
  ASSERT_FALSE(result);
  EXPECT_NE(result.description.find("version 1 used after version 3"), std::string::npos);
}

TEST(TransitionChecker, StartsAChangedAlgorithmAfresh) {
  const auto history = one_change(limit(Algorithm::gcra, {10, 1s}),
                                  limit(Algorithm::fixed_window, {10, 1s}), second + 1'000);
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 10, 1);
  admit(admits, second + 2'000, 10, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admit(admits, second + 3'000, 1, 2);
  EXPECT_FALSE(check_transitions(history, admits, bound));
}

TEST(TransitionChecker, ChecksEachLimitPositionOfAPolicy) {
  // The second limit shrinks its window; the first one is unchanged.
  Policy before = policy_of(limit(Algorithm::gcra, {100, 1s}, 100));
  before.limits.push_back(limit(Algorithm::sliding_window_log, {10, 1min}));
  Policy after = before;
  after.limits[1] = limit(Algorithm::sliding_window_log, {10, 10s});
  const std::vector<PolicyVersion> history = {{1, before, 0, Carry::as_is},
                                              {2, after, 5 * second, Carry::as_is}};
  std::vector<VersionedAdmit> admits;
  admit(admits, 4 * second, 10, 1);
  admit(admits, 14 * second + 1, 10, 2);  // the ten have left the 10 s window
  EXPECT_TRUE(check_transitions(history, admits, bound));
  admits.push_back({14 * second, 1, 2});
  const CheckResult result = check_transitions(history, admits, bound);
  ASSERT_FALSE(result);
  EXPECT_NE(result.description.find("limit #1"), std::string::npos);
}

TEST(TransitionChecker, ResetDropsTheLogAtTheChange) {
  const auto history =
      one_change(limit(Algorithm::sliding_window_log, {10, 1min}),
                 limit(Algorithm::sliding_window_log, {10, 1min}), 2 * second, Carry::reset);
  std::vector<VersionedAdmit> admits;
  admit(admits, second, 10, 1);
  admit(admits, 3 * second, 10, 2);
  EXPECT_TRUE(check_transitions(history, admits, bound));
  std::vector<VersionedAdmit> kept = admits;
  kept.back().policy_version = 2;
  EXPECT_FALSE(check_transitions(
      one_change(limit(Algorithm::sliding_window_log, {10, 1min}),
                 limit(Algorithm::sliding_window_log, {10, 1min}), 2 * second, Carry::as_is),
      kept, bound));
}

}  // namespace
}  // namespace redlimit::test

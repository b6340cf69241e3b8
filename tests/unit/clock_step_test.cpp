// A Redis clock step backwards, in the C++ models (and so in the local backend): the state is
// written at t0, then decided at t0 - 1 h. A stored time later than any the policy can produce
// at that now is a clock step; it locks the key at most for the state's own horizon (one
// period, tau, the bucket's refill), never for the whole step, and frees nothing.
// tests/redis/clock_step_test.cpp checks the scripts the same way.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "algorithms/policy_model.hpp"
#include "algorithms/reservations.hpp"
#include "limiter/local_backend.hpp"
#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t t0 = 1'800'000'000'500'000;  // half-way through a second, in 2027
constexpr std::int64_t hour = 3'600'000'000;
constexpr std::int64_t second = 1'000'000;

/// One key of one limit, driven with explicit times (microseconds).
class Key {
 public:
  explicit Key(Limit limit) : policy_(CompiledPolicy::compile(Policy::of(limit))) {
    states_.resize(1);
  }

  LimitOutcome acquire(std::int64_t now, std::int64_t permits = 1) {
    return decide_policy(policy_->specs(), states_, now, permits, Mode::acquire).limits.front();
  }
  ReserveOutcome reserve(std::int64_t now, std::int64_t permits, std::int64_t max_wait) {
    return detail::reserve(policy_->specs().front(), states_.front(), now, permits, max_wait);
  }
  /// Admits at `now` until denied; returns how many were admitted.
  int drain(std::int64_t now) {
    int admitted = 0;
    while (acquire(now).allowed)
      ++admitted;
    return admitted;
  }

 private:
  std::shared_ptr<const CompiledPolicy> policy_;
  std::vector<std::optional<LimitState>> states_;
};

/// 10 per second (a queue of 10 for the leaky bucket).
Limit ten_per_second(Algorithm algorithm) {
  return Limit{algorithm, {10, 1s}, 0, Window::aligned};
}

/// The longest a 10/s limit's state can hold a key after a step: one period, or two for the
/// sliding window counter (its current window then decays through the next one).
std::int64_t horizon(Algorithm algorithm) {
  return algorithm == Algorithm::sliding_window_counter ? 2 * second : second;
}

class ClockStepBack : public ::testing::TestWithParam<Algorithm> {};

TEST_P(ClockStepBack, LocksAKeyAtMostForTheStatesOwnHorizon) {
  Key key(ten_per_second(GetParam()));
  ASSERT_GE(key.drain(t0), 1);
  const std::int64_t stepped = t0 - hour;
  const LimitOutcome denied = key.acquire(stepped);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_GT(denied.retry_after_us, 0);
  EXPECT_LE(denied.retry_after_us, horizon(GetParam())) << "not the whole hour";
  EXPECT_LE(denied.reset_after_us, horizon(GetParam()));
  EXPECT_EQ(denied.now_us, stepped) << "the decision's time is now, not the stored one";
  EXPECT_TRUE(key.acquire(stepped + denied.retry_after_us).allowed);
}

TEST_P(ClockStepBack, FreesNothingAtTheStep) {
  Key key(ten_per_second(GetParam()));
  const int admitted = key.drain(t0);
  EXPECT_EQ(key.drain(t0 - hour), 0);
  EXPECT_LE(admitted + key.drain(t0 - hour + horizon(GetParam())),
            10 + 10 * horizon(GetParam()) / second)
      << "no more than the limit admits over the state's horizon";
}

// Why: a denial that did not write the clamped state back would clamp again at every later
// now, and callers retrying at once would keep the key locked for the whole step.
TEST_P(ClockStepBack, DenialsAfterTheStepDoNotExtendTheLock) {
  Key key(ten_per_second(GetParam()));
  key.drain(t0);
  const std::int64_t stepped = t0 - hour;
  std::int64_t now = stepped;
  while (!key.acquire(now).allowed && now < t0)
    now += 10'000;
  EXPECT_LE(now - stepped, horizon(GetParam()));
}

TEST_P(ClockStepBack, TheLocalBackendBoundsTheLockToo) {
  std::int64_t now = t0;
  LocalBackend backend([&now] { return now; });
  const DecideRequest request(CompiledPolicy::compile(Policy::of(ten_per_second(GetParam()))),
                              KeyBase("k"), Operation::acquire, 1);
  while (backend.decide_now(request).allowed) {
  }
  now = t0 - hour;  // the system clock steps back
  const Decision denied = backend.decide_now(request);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_LE(denied.retry_after.count(), horizon(GetParam())) << "not the whole hour";
  now += denied.retry_after.count();
  EXPECT_TRUE(backend.decide_now(request).allowed);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, ClockStepBack,
                         ::testing::Values(Algorithm::gcra, Algorithm::token_bucket,
                                           Algorithm::leaky_bucket, Algorithm::fixed_window,
                                           Algorithm::sliding_window_log,
                                           Algorithm::sliding_window_counter),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(to_string(info.param));
                         });

TEST(ClockStepBack, AnAnchoredWindowLocksAtMostOnePeriod) {
  Key key(Limit{Algorithm::fixed_window, {10, 1s}, 0, Window::anchored});
  EXPECT_EQ(key.drain(t0), 10);
  const LimitOutcome denied = key.acquire(t0 - hour);
  ASSERT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_us, second) << "the stored window, taken as one starting now";
}

// Why both: a reserved key may legitimately store a slot up to the year 2112, so "later than
// the policy can produce" says nothing there; the time of the write does. A step back keeps
// the backlog as it was at the write (measured from the write), no more, no less.
TEST(ClockStepBack, AReservedGcraKeyKeepsItsBacklog) {
  Key key(Limit{Algorithm::gcra, {10, 1s}, 10, Window::aligned});
  ASSERT_TRUE(key.reserve(t0, 60, 10 * second).decision.allowed);  // TAT t0 + 6 s, slot + 5 s
  const LimitOutcome denied = key.acquire(t0 - 10 * second);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_EQ(denied.retry_after_us, 5 * second + 100'000)
      << "the backlog of the write (TAT 6 s after it), the step excluded";
}

TEST(ClockStepBack, AReservedGcraKeyWhoseSlotPassedLocksAtMostItsBacklog) {
  Key key(Limit{Algorithm::gcra, {10, 1s}, 10, Window::aligned});
  ASSERT_TRUE(key.reserve(t0, 20, 10 * second).decision.allowed);  // TAT t0 + 2 s, wait 1 s
  const std::int64_t stepped = t0 + 2 * second - hour;             // the slot passed, then -1 h
  const LimitOutcome denied = key.acquire(stepped);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_EQ(denied.retry_after_us, second + 100'000)
      << "the 2 s backlog of the write, counted from the step, less tau; not the hour";
  EXPECT_TRUE(key.acquire(stepped + denied.retry_after_us).allowed);
}

}  // namespace
}  // namespace redlimit::detail

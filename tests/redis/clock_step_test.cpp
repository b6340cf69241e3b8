// A Redis clock step backwards, in the scripts: the state is written at t0, then decided at
// t0 - 1 h (an injected now, as the scripts take it for tests). A stored time later than any
// the policy can produce at that now is a clock step; it locks the key at most for the state's
// own horizon (one period, tau, the bucket's refill), never for the whole step, and frees
// nothing. Both shapes are checked: the lean script (try_acquire on one limit) and the general
// one. tests/unit/clock_step_test.cpp checks the C++ models the same way.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "limiter/redis_backend.hpp"
#include "policy/compiled_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t t0 = 1'800'000'000'500'000;  // half-way through a second, in 2027
constexpr std::int64_t hour = 3'600'000'000;
constexpr std::int64_t second = 1'000'000;

/// The longest a 10/s limit's state can hold a key after a step: one period, or two for the
/// sliding window counter (its current window then decays through the next one).
std::int64_t horizon(Algorithm algorithm) {
  return algorithm == Algorithm::sliding_window_counter ? 2 * second : second;
}

/// Which script decides: the algorithm's lean one, or the general one.
enum class Shape { lean, general };

class ClockStepBack : public test::LoopTest,
                      public ::testing::WithParamInterface<std::tuple<Algorithm, Shape>> {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }

  Algorithm algorithm() const { return std::get<0>(GetParam()); }

  /// One acquire of `permits` at `now` on the key, by the shape under test.
  Decision acquire(std::int64_t now, std::int64_t permits = 1) {
    const DecideRequest request(policy_, KeyBase("{clock-step}"), Operation::acquire, permits, now);
    if (std::get<1>(GetParam()) == Shape::general) {
      return run(loop(), backend_.decide_with_general_script(request));
    }
    return run(loop(), backend_.decide(request));
  }
  /// Admits at `now` until denied; returns how many were admitted.
  int drain(std::int64_t now) {
    int admitted = 0;
    while (acquire(now).allowed)
      ++admitted;
    return admitted;
  }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  RedisBackend backend_{client_.dispatcher()};
  std::shared_ptr<const CompiledPolicy> policy_ =
      CompiledPolicy::compile(Policy::of(Limit{algorithm(), {10, 1s}, 0, Window::aligned}));
};

TEST_P(ClockStepBack, LocksAKeyAtMostForTheStatesOwnHorizon) {
  ASSERT_GE(drain(t0), 1);
  const std::int64_t stepped = t0 - hour;
  const Decision denied = acquire(stepped);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_GT(denied.retry_after.count(), 0);
  EXPECT_LE(denied.retry_after.count(), horizon(algorithm())) << "not the whole hour";
  EXPECT_LE(denied.reset_after.count(), horizon(algorithm()));
  EXPECT_EQ(denied.server_time_us, stepped) << "the decision's time is now, not the stored one";
  EXPECT_TRUE(acquire(stepped + denied.retry_after.count()).allowed);
}

TEST_P(ClockStepBack, FreesNothingAtTheStep) {
  const int admitted = drain(t0);
  EXPECT_EQ(drain(t0 - hour), 0);
  EXPECT_LE(admitted + drain(t0 - hour + horizon(algorithm())),
            10 + 10 * horizon(algorithm()) / second)
      << "no more than the limit admits over the state's horizon";
}

// Why: a denial that did not write the clamped state back would clamp again at every later
// now, and callers retrying at once would keep the key locked for the whole step.
TEST_P(ClockStepBack, DenialsAfterTheStepDoNotExtendTheLock) {
  drain(t0);
  const std::int64_t stepped = t0 - hour;
  std::int64_t now = stepped;
  while (!acquire(now).allowed && now < stepped + 10 * second)
    now += 50'000;
  EXPECT_LE(now - stepped, horizon(algorithm()));
}

/// A GCRA key of 10/s, burst 10, that acquire() reserved on (the reserve script).
class ReservedGcraClockStepBack : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  Reservation reserve(std::int64_t now, std::int64_t permits, std::int64_t max_wait) {
    return run(loop(), backend_.reserve(request(now, permits), max_wait));
  }
  Decision acquire(std::int64_t now) { return run(loop(), backend_.decide(request(now, 1))); }

 private:
  DecideRequest request(std::int64_t now, std::int64_t permits) const {
    return DecideRequest(policy_, KeyBase("{reserved-step}"), Operation::acquire, permits, now);
  }

  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
  RedisBackend backend_{client_.dispatcher()};
  std::shared_ptr<const CompiledPolicy> policy_ =
      CompiledPolicy::compile(Policy::of(Limit{Algorithm::gcra, {10, 1s}, 10, Window::aligned}));
};

TEST_F(ReservedGcraClockStepBack, KeepsExactlyTheBacklogOfTheWrite) {
  ASSERT_TRUE(reserve(t0, 60, 10 * second).decision.allowed);  // TAT t0 + 6 s, slot + 5 s
  const Decision denied = acquire(t0 - 10 * second);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_EQ(denied.retry_after.count(), 5 * second + 100'000) << "the step excluded";
}

TEST_F(ReservedGcraClockStepBack, LocksAtMostTheBacklogOnceTheSlotPassed) {
  ASSERT_TRUE(reserve(t0, 20, 10 * second).decision.allowed);  // TAT t0 + 2 s, wait 1 s
  const std::int64_t stepped = t0 + 2 * second - hour;
  const Decision denied = acquire(stepped);
  ASSERT_FALSE(denied.allowed) << "a step back frees nothing";
  EXPECT_EQ(denied.retry_after.count(), second + 100'000) << "not the hour";
  EXPECT_TRUE(acquire(stepped + denied.retry_after.count()).allowed);
}

INSTANTIATE_TEST_SUITE_P(
    EveryAlgorithm, ClockStepBack,
    ::testing::Combine(::testing::Values(Algorithm::gcra, Algorithm::token_bucket,
                                         Algorithm::leaky_bucket, Algorithm::fixed_window,
                                         Algorithm::sliding_window_log,
                                         Algorithm::sliding_window_counter),
                       ::testing::Values(Shape::lean, Shape::general)),
    [](const ::testing::TestParamInfo<std::tuple<Algorithm, Shape>>& info) {
      return std::string(to_string(std::get<0>(info.param))) +
             (std::get<1>(info.param) == Shape::lean ? "_lean" : "_general");
    });

}  // namespace
}  // namespace redlimit::detail

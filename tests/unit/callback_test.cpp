// The callback style, for code without coroutines: plain uv_run(), no run(), no Task in sight.
#include "redlimit/callback.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <stop_token>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using CallbackStyle = test::LoopTest;

Policy per_second(std::int64_t permits) {
  return Policy::of(Limit{Algorithm::gcra, {permits, 1s}, 1, Window::aligned});
}

TEST_F(CallbackStyle, TryAcquireCallsBackFromTheLoopWithTheDecision) {
  Limiter limiter(loop(), per_second(10), {.name = "cb"});
  std::vector<bool> allowed;
  for (int i = 0; i < 2; ++i) {
    limiter.try_acquire("k", 1, [&](Result<Decision> r) { allowed.push_back(r.value().allowed); });
  }
  EXPECT_TRUE(allowed.empty()) << "never called back inline";
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(allowed, (std::vector<bool>{true, false})) << "burst 1: the second is denied";
}

TEST_F(CallbackStyle, BadInputArrivesAsATypedErrorInTheCallback) {
  Limiter limiter(loop(), per_second(10), {.name = "cb"});
  std::optional<Result<Decision>> result;
  limiter.try_acquire("", 1, [&](Result<Decision> r) { result.emplace(std::move(r)); });
  uv_run(loop(), UV_RUN_DEFAULT);
  ASSERT_TRUE(result);
  EXPECT_FALSE(result->ok());
  EXPECT_THROW(result->value(), InvalidArgument);
  EXPECT_NE(result->error_message().find("key"), std::string::npos) << result->error_message();
}

TEST_F(CallbackStyle, AcquireCallsBackWhenThePermitsAreHad) {
  Limiter limiter(loop(), per_second(20), {.name = "cb"});
  const auto start = Clock::now();
  std::vector<Clock::duration> done_after;
  for (int i = 0; i < 3; ++i) {
    limiter.acquire("k", 1, {}, [&](Result<Decision> r) {
      EXPECT_TRUE(r.value().allowed);
      done_after.push_back(Clock::now() - start);
    });
  }
  uv_run(loop(), UV_RUN_DEFAULT);
  ASSERT_EQ(done_after.size(), 3u);
  EXPECT_GE(done_after[2], 100ms - 1ms) << "the third waits two intervals of 50 ms";
  EXPECT_LT(done_after[2], 100ms + test::deadline_slack);
}

TEST_F(CallbackStyle, AStopRequestEndsAWaitingAcquireWithCancelled) {
  Limiter limiter(loop(), per_second(1), {.name = "cb"});
  std::stop_source stop;
  std::vector<std::string> outcomes;
  auto record = [&](Result<Decision> r) {
    outcomes.push_back(r.ok() ? "allowed" : r.error_message());
    if (r.ok()) stop.request_stop();  // the first one is in: cancel the one waiting behind it
  };
  limiter.acquire("k", 1, {}, record);
  limiter.acquire("k", 1, {.stop = stop.get_token()}, [&](Result<Decision> r) {
    EXPECT_THROW(r.value(), Cancelled);
    outcomes.push_back("cancelled");
  });
  const auto start = Clock::now();
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(outcomes, (std::vector<std::string>{"allowed", "cancelled"}));
  EXPECT_LT(Clock::now() - start, 500ms) << "not after the 1 s wait";
}

TEST_F(CallbackStyle, StartRunsAnyTaskIncludingOnesWithoutAValue) {
  Limiter limiter(loop(), per_second(1), {.name = "cb"});
  std::vector<std::string> steps;
  limiter.try_acquire("k", 1, [&](Result<Decision> r) {
    steps.push_back(r.value().allowed ? "allowed" : "denied");
    start(loop(), limiter.reset("k"), [&](Result<void> reset) {
      reset.value();
      steps.push_back("reset");
      limiter.try_acquire("k", 1, [&](Result<Decision> again) {
        steps.push_back(again.value().allowed ? "allowed" : "denied");
      });
    });
  });
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(steps, (std::vector<std::string>{"allowed", "reset", "allowed"}));
}

}  // namespace
}  // namespace redlimit

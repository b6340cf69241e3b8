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

TEST_F(CallbackStyle, CallbacksTakeOnePermitByDefault) {
  Limiter limiter(loop(), Policy{Limit::gcra("3/min")}, {.name = "cb"});
  std::vector<std::int64_t> remaining;
  auto record = [&](Result<Decision> r) { remaining.push_back(r.value().remaining); };
  limiter.try_acquire("k", record);
  limiter.acquire("k", record);
  limiter.acquire("k", 1, record);
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{2, 1, 0}));
}

TEST_F(CallbackStyle, CallbacksOnTheSharedKeyTakeOnePermitByDefault) {
  Limiter limiter(loop(), Policy{Limit::gcra("3/min")}, {.name = "cb"});
  std::vector<std::int64_t> remaining;
  auto record = [&](Result<Decision> r) { remaining.push_back(r.value().remaining); };
  limiter.try_acquire(record);
  limiter.acquire(record);
  limiter.acquire(Permits{1}, record);
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{2, 1, 0}));
  EXPECT_FALSE(run(loop(), limiter.try_acquire("cb")).allowed) << "the name is the key";
}

TEST(ResultErrors, AnOkResultHasNoErrorKind) {
  const Result<int> ok(7);
  EXPECT_EQ(ok.error_kind(), ErrorKind::none);
  EXPECT_EQ(ok.error_as<Error>(), nullptr);
  EXPECT_EQ(Result<void>().error_kind(), ErrorKind::none);
}

TEST(ResultErrors, TellCancelledFromUnavailableWithoutARethrow) {
  const Result<int> cancelled(std::make_exception_ptr(Cancelled()));
  const Result<int> timed_out(std::make_exception_ptr(TimeoutError("late", true)));
  EXPECT_EQ(cancelled.error_kind(), ErrorKind::cancelled);
  EXPECT_EQ(timed_out.error_kind(), ErrorKind::unavailable);
  EXPECT_NE(cancelled.error_as<Cancelled>(), nullptr);
  EXPECT_EQ(cancelled.error_as<Unavailable>(), nullptr);
  ASSERT_NE(timed_out.error_as<Unavailable>(), nullptr);
  EXPECT_TRUE(timed_out.error_as<Unavailable>()->maybe_executed());
  EXPECT_NE(timed_out.error_as<TimeoutError>(), nullptr);
  EXPECT_EQ(timed_out.error_as<ConnectionError>(), nullptr);
  EXPECT_STREQ(timed_out.error_as<Error>()->what(), "late");
}

TEST(ResultErrors, EveryErrorClassHasItsKind) {
  const auto kind = [](auto error) {
    return Result<void>(std::make_exception_ptr(std::move(error))).error_kind();
  };
  EXPECT_EQ(kind(InvalidArgument("x")), ErrorKind::invalid_argument);
  EXPECT_EQ(kind(AdjustmentRefused("x")), ErrorKind::adjustment_refused);
  EXPECT_EQ(kind(ConfigError("x")), ErrorKind::config);
  EXPECT_EQ(kind(TlsError("x")), ErrorKind::config);
  EXPECT_EQ(kind(UsageError("x")), ErrorKind::usage);
  EXPECT_EQ(kind(ConnectionError("x")), ErrorKind::unavailable);
  EXPECT_EQ(kind(Overloaded("x")), ErrorKind::unavailable);
  EXPECT_EQ(kind(CircuitOpen("x", 1ms)), ErrorKind::unavailable);
  EXPECT_EQ(kind(LeaseExpired("x")), ErrorKind::lease_expired);
  EXPECT_EQ(kind(PolicyNotFound("x")), ErrorKind::policy_not_found);
  EXPECT_EQ(kind(ReplyError("BUSY", "x")), ErrorKind::reply);
  EXPECT_EQ(kind(ProtocolError("x")), ErrorKind::protocol);
  EXPECT_EQ(kind(std::runtime_error("x")), ErrorKind::other);
  EXPECT_EQ(kind(42), ErrorKind::other);
}

TEST(ResultErrors, ACopyPointsAtTheSameError) {
  std::optional<Result<int>> first(Result<int>(std::make_exception_ptr(Cancelled("stop"))));
  const Result<int> copy = *first;
  const Cancelled* before = first->error_as<Cancelled>();
  first.reset();
  EXPECT_EQ(copy.error_as<Cancelled>(), before);
  EXPECT_STREQ(copy.error_as<Cancelled>()->what(), "stop");
}

TEST_F(CallbackStyle, ACallbackTellsAStoppedAcquireByItsKind) {
  Limiter limiter(loop(), per_second(1), {.name = "cb"});
  std::stop_source stop;
  stop.request_stop();
  std::optional<ErrorKind> kind;
  limiter.try_acquire("k", [](Result<Decision>) {});
  limiter.acquire("k", 1, {.stop = stop.get_token()},
                  [&](Result<Decision> r) { kind = r.error_kind(); });
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(kind, ErrorKind::cancelled);
}

}  // namespace
}  // namespace redlimit

#include <gtest/gtest.h>

#include <stop_token>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using test::elapsed_since;
using SleepTest = test::LoopTest;
using Clock = std::chrono::steady_clock;

Task<void> sleep_then_flag(uv_loop_t* loop, std::chrono::microseconds d, std::stop_token stop,
                           bool* resumed) {
  try {
    co_await sleep_for(loop, d, std::move(stop));
  } catch (const Cancelled&) {
    *resumed = true;
    throw;
  }
  *resumed = true;
}

Task<void> stop_later(uv_loop_t* loop, std::stop_source* source, bool* sleeper_resumed,
                      bool* resumed_inline) {
  co_await sleep_for(loop, 5ms);
  source->request_stop();
  *resumed_inline = *sleeper_resumed;
}

Task<void> both(Task<void> first, Task<void> second, uv_loop_t* loop) {
  spawn(loop, std::move(second));
  co_await std::move(first);
}

TEST_F(SleepTest, WaitsAtLeastTheDuration) {
  const auto start = Clock::now();
  run(loop(), sleep_for(loop(), 30ms));
  EXPECT_GE(elapsed_since(start), 30ms);
}

TEST_F(SleepTest, RoundsSubMillisecondWaitsUpNeverDown) {
  const auto start = Clock::now();
  run(loop(), sleep_for(loop(), 1500us));
  EXPECT_GE(Clock::now() - start, 1500us);
}

/// Sleeps `count` times for `duration`; how many ended before it had passed.
Task<void> count_short_sleeps(uv_loop_t* loop, std::chrono::microseconds duration, int count,
                              int* short_sleeps) {
  for (int i = 0; i < count; ++i) {
    const auto start = Clock::now();
    co_await sleep_for(loop, duration);
    if (Clock::now() - start < duration) ++*short_sleeps;
  }
}

TEST_F(SleepTest, NeverEndsBeforeItsDurationOnALoopThatNeverBlocks) {
  // A loop with other work wakes often; its clock counts whole milliseconds, so a timer checked
  // on a wake-up may be due by it up to 1 ms before the duration has passed. An idle handle
  // keeps this loop from blocking at all.
  uv_idle_t busy;
  uv_idle_init(loop(), &busy);
  uv_idle_start(&busy, [](uv_idle_t*) {});
  int short_sleeps = 0;
  run(loop(), count_short_sleeps(loop(), 2ms, 20, &short_sleeps));
  run(loop(), count_short_sleeps(loop(), 1500us, 20, &short_sleeps));
  uv_idle_stop(&busy);
  uv_close(reinterpret_cast<uv_handle_t*>(&busy), nullptr);
  uv_run(loop(), UV_RUN_DEFAULT);  // Why: the handle lives on this stack until it is closed
  EXPECT_EQ(short_sleeps, 0) << "of 40 sleeps";
}

TEST_F(SleepTest, StopRequestEndsTheSleepWithCancelledFromTheLoop) {
  std::stop_source source;
  bool sleeper_resumed = false;
  bool resumed_inline = true;
  const auto start = Clock::now();
  EXPECT_THROW(
      run(loop(), both(sleep_then_flag(loop(), 10s, source.get_token(), &sleeper_resumed),
                       stop_later(loop(), &source, &sleeper_resumed, &resumed_inline), loop())),
      Cancelled);
  EXPECT_TRUE(sleeper_resumed);
  EXPECT_FALSE(resumed_inline) << "request_stop() must not resume the sleeper inline";
  EXPECT_LT(elapsed_since(start), 5s);
}

TEST_F(SleepTest, AlreadyStoppedTokenCancelsWithoutWaiting) {
  std::stop_source source;
  source.request_stop();
  const auto start = Clock::now();
  EXPECT_THROW(run(loop(), sleep_for(loop(), 10s, source.get_token())), Cancelled);
  EXPECT_LT(elapsed_since(start), 1s);
}

Task<void> stop_soon(uv_loop_t* loop, std::stop_source* source) {
  co_await sleep_for(loop, 5ms);
  source->request_stop();
}

TEST_F(SleepTest, TheLongestDurationDoesNotOverflow) {
  std::stop_source source;
  bool resumed = false;
  EXPECT_THROW(run(loop(), both(sleep_then_flag(loop(), std::chrono::microseconds::max(),
                                                source.get_token(), &resumed),
                                stop_soon(loop(), &source), loop())),
               Cancelled);
  EXPECT_TRUE(resumed);
}

TEST_F(SleepTest, DestroyingTheSleepingTaskReleasesItsTimer) {
  {
    test::StartedTask sleeping = test::start(sleep_for(loop(), 10s));
    EXPECT_FALSE(sleeping.done());
  }
  uv_run(loop(), UV_RUN_DEFAULT);  // runs the timer's close callback; nothing else is left
}

}  // namespace
}  // namespace redlimit

// LoopTurn: answers made without I/O continue at once within the loop's turn, and give the loop
// a turn once it has lasted the budget (issue 15, bug 1).
#include "runtime/loop_turn.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using detail::LoopTurn;
using LoopTurnTest = test::LoopTest;
using Clock = std::chrono::steady_clock;

void busy_for(Clock::duration d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

Task<void> flag_on_the_next_iteration(uv_loop_t* loop, bool* ran) {
  co_await sleep_for(loop, 0ms);
  *ran = true;
}

/// Yields once after `busy`; tells whether a timer due meanwhile ran before the caller went on.
Task<void> yield_after(uv_loop_t* loop, LoopTurn& turn, Clock::duration busy, bool* other_ran) {
  co_await turn.yield_if_due();  // starts the turn
  bool timer_ran = false;
  spawn(loop, flag_on_the_next_iteration(loop, &timer_ran));
  busy_for(busy);
  // Why several calls: within a turn, the clock is read only every calls_per_check calls.
  for (int i = 0; i < 2 * LoopTurn::calls_per_check && !timer_ran; ++i)
    co_await turn.yield_if_due();
  *other_ran = timer_ran;
  // Why: the spawned task must end before this frame (and its flag) goes away.
  while (!timer_ran)
    co_await sleep_for(loop, 1ms);
}

TEST_F(LoopTurnTest, ContinuesAtOnceWithinItsBudget) {
  LoopTurn turn(loop(), 100ms);
  bool other_ran = true;
  run(loop(), yield_after(loop(), turn, 1ms, &other_ran));
  EXPECT_FALSE(other_ran) << "no suspension within the budget";
}

TEST_F(LoopTurnTest, LetsTheLoopRunOnceTheTurnHasLastedItsBudget) {
  LoopTurn turn(loop(), 1ms);
  bool other_ran = false;
  run(loop(), yield_after(loop(), turn, 3ms, &other_ran));
  EXPECT_TRUE(other_ran) << "a timer due meanwhile ran before the caller went on";
}

Task<void> yield_after_busy(LoopTurn& turn, bool* resumed) {
  co_await turn.yield_if_due();
  busy_for(3ms);
  for (int i = 0; i < LoopTurn::calls_per_check; ++i)
    co_await turn.yield_if_due();
  *resumed = true;
}

TEST_F(LoopTurnTest, AWaiterWhoseFrameIsDestroyedIsNotResumed) {
  LoopTurn turn(loop(), 1ms);
  bool resumed = false;
  {
    test::StartedTask started = test::start(yield_after_busy(turn, &resumed));
    EXPECT_FALSE(started.done());
  }
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_FALSE(resumed);
}

Task<void> record_after_yield(LoopTurn& turn, int index, Clock::duration busy,
                              std::vector<int>* order) {
  co_await turn.yield_if_due();
  busy_for(busy);
  order->push_back(index);
}

Task<void> callers_in_one_turn(LoopTurn& turn, int count, std::vector<int>* order) {
  TaskGroup group;
  // The first caller starts the turn and uses it up; every later one is due for a yield, but
  // the clock is read only on every calls_per_check-th call.
  group.add(record_after_yield(turn, 0, 3ms, order));
  for (int i = 1; i < count; ++i)
    group.add(record_after_yield(turn, i, 0ms, order));
  co_await group.join();
}

TEST_F(LoopTurnTest, CallersAfterOneThatYieldedKeepTheirOrder) {
  LoopTurn turn(loop(), 1ms);
  std::vector<int> order;
  const int callers = 4 * LoopTurn::calls_per_check;
  run(loop(), callers_in_one_turn(turn, callers, &order));
  ASSERT_EQ(order.size(), static_cast<std::size_t>(callers));
  for (int i = 0; i < callers; ++i)
    EXPECT_EQ(order[static_cast<std::size_t>(i)], i) << "a later caller overtook a yielded one";
}

Task<void> answer_many(LoopTurn& turn, Clock::duration busy_first, int answers) {
  co_await turn.yield_if_due();
  busy_for(busy_first);
  for (int i = 0; i < answers; ++i)
    co_await turn.yield_if_due();
}

Task<void> two_callers_answering(LoopTurn& turn, int answers) {
  TaskGroup group;
  group.add(answer_many(turn, 3ms, answers));  // uses up the turn: both are resumed later
  group.add(answer_many(turn, 0ms, answers));
  co_await group.join();
}

void count_iteration(uv_check_t* check) {
  ++*static_cast<int*>(check->data);
}

// Why: callers resumed together used to find the rest of their round still queued, yield again,
// and from then on get one answer per loop iteration.
TEST_F(LoopTurnTest, CallersResumedTogetherGoOnForATurnEach) {
  LoopTurn turn(loop(), 1ms);
  int iterations = 0;
  uv_check_t check;
  uv_check_init(loop(), &check);
  check.data = &iterations;
  uv_check_start(&check, &count_iteration);
  uv_unref(reinterpret_cast<uv_handle_t*>(&check));
  const int answers = 4000;
  run(loop(), two_callers_answering(turn, answers));
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  uv_run(loop(), UV_RUN_DEFAULT);
  // Each turn of 1 ms holds hundreds of answers or more; one answer per iteration would take
  // `answers` iterations.
  EXPECT_LT(iterations, answers / 4);
}

}  // namespace
}  // namespace redlimit

// BackgroundTasks: the one scope of a client's background work. close() waits for the work done
// for callers first, then joins the client's upkeep; nothing started in it outlives join().
#include "runtime/background_tasks.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using detail::BackgroundTasks;
using BackgroundTasksTest = test::LoopTest;

Task<void> sleep_then_flag(uv_loop_t* loop, std::chrono::milliseconds pause, bool* done) {
  co_await sleep_for(loop, pause);
  *done = true;
}

Task<void> flag(bool* done) {
  *done = true;
  co_return;
}

Task<void> wait_all_then_note(BackgroundTasks* tasks, const bool* upkeep_done,
                              bool* upkeep_done_at_wait_all) {
  co_await tasks->wait_all();
  *upkeep_done_at_wait_all = *upkeep_done;
  co_await tasks->join();
}

TEST_F(BackgroundTasksTest, JoinWaitsForWorkAndUpkeep) {
  BackgroundTasks tasks(loop());
  bool work_done = false;
  bool upkeep_done = false;
  tasks.start(sleep_then_flag(loop(), 5ms, &work_done));
  tasks.start_upkeep(sleep_then_flag(loop(), 10ms, &upkeep_done));
  run(loop(), tasks.join());
  EXPECT_TRUE(work_done);
  EXPECT_TRUE(upkeep_done);
}

TEST_F(BackgroundTasksTest, WaitAllDoesNotWaitForUpkeep) {
  BackgroundTasks tasks(loop());
  bool upkeep_done = false;
  bool upkeep_done_at_wait_all = true;
  tasks.start_upkeep(sleep_then_flag(loop(), 20ms, &upkeep_done));
  run(loop(), wait_all_then_note(&tasks, &upkeep_done, &upkeep_done_at_wait_all));
  EXPECT_FALSE(upkeep_done_at_wait_all) << "an upkeep task (a Sentinel lookup) may run until "
                                           "the router closes, after wait_all()";
  EXPECT_TRUE(upkeep_done);
}

TEST_F(BackgroundTasksTest, UpkeepStartsOnTheNextIterationNotInline) {
  BackgroundTasks tasks(loop());
  bool done = false;
  tasks.start_upkeep(flag(&done));
  EXPECT_FALSE(done);
  run(loop(), tasks.join());
  EXPECT_TRUE(done);
}

TEST_F(BackgroundTasksTest, UpkeepStartedNowRunsWithinTheCall) {
  BackgroundTasks tasks(loop());
  bool done = false;
  tasks.start_upkeep_now(flag(&done));
  EXPECT_TRUE(done);
  run(loop(), tasks.join());
}

TEST_F(BackgroundTasksTest, UpkeepStartedAfterJoinIsDropped) {
  BackgroundTasks tasks(loop());
  run(loop(), tasks.join());
  bool done = false;
  tasks.start_upkeep(flag(&done));
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_FALSE(done);
}

TEST_F(BackgroundTasksTest, WorkStartedAfterStopAcceptingIsDropped) {
  BackgroundTasks tasks(loop());
  tasks.stop_accepting();
  bool done = false;
  tasks.start(flag(&done));
  run(loop(), tasks.join());
  EXPECT_FALSE(done);
}

}  // namespace
}  // namespace redlimit

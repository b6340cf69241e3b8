// Together as a specification: tasks run at once, the awaiting coroutine resumes when all have
// ended, and destroying it destroys the tasks still running.
#include "runtime/together.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"
#include "support/started_task.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;
using TogetherTest = test::LoopTest;

Task<void> sleep_then_record(uv_loop_t* loop, std::chrono::milliseconds d, int id,
                             std::vector<int>* ended) {
  co_await sleep_for(loop, d);
  ended->push_back(id);
}

Task<void> record(int id, std::vector<int>* ended) {
  ended->push_back(id);
  co_return;
}

Task<void> sleep_then_fail(uv_loop_t* loop, std::chrono::milliseconds d) {
  co_await sleep_for(loop, d);
  throw std::runtime_error("task failed");
}

Task<void> all_of(std::vector<Task<void>> tasks, std::vector<int>* ended) {
  co_await Together(std::move(tasks));
  ended->push_back(0);
}

/// Sets `*destroyed` when the frame that holds it goes.
struct DestroyedFlag {
  bool* destroyed;
  ~DestroyedFlag() { *destroyed = true; }
};

Task<void> sleep_holding(uv_loop_t* loop, bool* destroyed) {
  const DestroyedFlag flag{destroyed};
  co_await sleep_for(loop, 10s);
}

TEST_F(TogetherTest, RunsEveryTaskAtOnceAndResumesWhenAllHaveEnded) {
  std::vector<int> ended;
  std::vector<Task<void>> tasks;
  tasks.push_back(sleep_then_record(loop(), 20ms, 1, &ended));
  tasks.push_back(sleep_then_record(loop(), 5ms, 2, &ended));
  tasks.push_back(record(3, &ended));
  run(loop(), all_of(std::move(tasks), &ended));
  EXPECT_EQ(ended, (std::vector<int>{3, 2, 1, 0}));
}

TEST_F(TogetherTest, TasksThatEndAtOnceDoNotSuspendTheCaller) {
  std::vector<int> ended;
  std::vector<Task<void>> tasks;
  tasks.push_back(record(1, &ended));
  tasks.push_back(record(2, &ended));
  const test::StartedTask started = test::start(all_of(std::move(tasks), &ended));
  EXPECT_TRUE(started.done());
  EXPECT_EQ(ended, (std::vector<int>{1, 2, 0}));
}

TEST_F(TogetherTest, RethrowsTheFirstErrorAfterEveryTaskHasEnded) {
  std::vector<int> ended;
  std::vector<Task<void>> tasks;
  tasks.push_back(sleep_then_fail(loop(), 5ms));
  tasks.push_back(sleep_then_record(loop(), 15ms, 1, &ended));
  EXPECT_THROW(run(loop(), all_of(std::move(tasks), &ended)), std::runtime_error);
  EXPECT_EQ(ended, (std::vector<int>{1}));
}

TEST_F(TogetherTest, DestroyingTheCallerDestroysTheTasksStillRunning) {
  bool destroyed = false;
  std::vector<int> ended;
  {
    std::vector<Task<void>> tasks;
    tasks.push_back(sleep_holding(loop(), &destroyed));
    const test::StartedTask started = test::start(all_of(std::move(tasks), &ended));
    EXPECT_FALSE(started.done());
    EXPECT_FALSE(destroyed);
  }
  EXPECT_TRUE(destroyed);
  EXPECT_TRUE(ended.empty());
  uv_run(loop(), UV_RUN_DEFAULT);  // the sleep's closed timer
}

}  // namespace
}  // namespace redlimit::detail

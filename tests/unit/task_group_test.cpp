#include "redlimit/task_group.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using TaskGroupTest = test::LoopTest;

Task<void> sleep_then_record(uv_loop_t* loop, std::chrono::milliseconds d, int id,
                             std::vector<int>* ended) {
  co_await sleep_for(loop, d);
  ended->push_back(id);
}

Task<void> sleep_then_fail(uv_loop_t* loop, std::chrono::milliseconds d) {
  co_await sleep_for(loop, d);
  throw std::runtime_error("task failed");
}

TEST_F(TaskGroupTest, JoinResumesWhenEveryTaskHasEnded) {
  std::vector<int> ended;
  run(loop(), [](uv_loop_t* loop, std::vector<int>* ended) -> Task<void> {
    TaskGroup group;
    group.add(sleep_then_record(loop, 20ms, 1, ended));
    group.add(sleep_then_record(loop, 5ms, 2, ended));
    group.add(sleep_then_record(loop, 10ms, 3, ended));
    EXPECT_EQ(group.running(), 3u);
    co_await group.join();
    EXPECT_EQ(group.running(), 0u);
  }(loop(), &ended));
  EXPECT_EQ(ended, (std::vector<int>{2, 3, 1}));
}

TEST_F(TaskGroupTest, JoiningAnEmptyGroupDoesNotSuspend) {
  run(loop(), []() -> Task<void> {
    TaskGroup group;
    co_await group.join();
  }());
}

TEST_F(TaskGroupTest, JoinRethrowsTheFirstEscapedExceptionAfterTheOthersEnd) {
  std::vector<int> ended;
  EXPECT_THROW(run(loop(),
                   [](uv_loop_t* loop, std::vector<int>* ended) -> Task<void> {
                     TaskGroup group;
                     group.add(sleep_then_fail(loop, 5ms));
                     group.add(sleep_then_record(loop, 15ms, 1, ended));
                     co_await group.join();
                   }(loop(), &ended)),
               std::runtime_error);
  EXPECT_EQ(ended, (std::vector<int>{1}));
}

}  // namespace
}  // namespace redlimit

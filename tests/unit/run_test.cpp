#include <gtest/gtest.h>

#include <coroutine>
#include <string>

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using RunTest = test::LoopTest;

Task<int> answer() {
  co_return 42;
}

Task<int> nested_run(uv_loop_t* loop) {
  co_return run(loop, answer());
}

Task<int> after_sleep(uv_loop_t* loop) {
  co_await sleep_for(loop, 2ms);
  co_return 7;
}

Task<void> wait_forever() {
  co_await std::suspend_always{};
}

TEST_F(RunTest, ReturnsTheValueOfATaskThatSuspends) {
  EXPECT_EQ(run(loop(), after_sleep(loop())), 7);
}

TEST_F(RunTest, RefusesToBeCalledFromInsideTheLoop) {
  try {
    run(loop(), nested_run(loop()));
    FAIL() << "run() inside the loop must throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("inside the event loop"), std::string::npos) << e.what();
  }
}

TEST_F(RunTest, FailsWhenTheLoopRunsOutOfWorkBeforeTheTaskEnds) {
  EXPECT_THROW(run(loop(), wait_forever()), UsageError);
}

}  // namespace
}  // namespace redlimit

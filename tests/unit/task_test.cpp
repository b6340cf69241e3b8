#include "redlimit/task.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using test::LoopTest;

static_assert(!std::is_copy_constructible_v<Task<int>>, "Task is move-only");
static_assert(std::is_nothrow_move_constructible_v<Task<int>>);

Task<int> forty_two() {
  co_return 42;
}

Task<std::string> concatenate(std::string a, std::string b) {
  co_return a + b;
}

Task<int> add_one(Task<int> inner) {
  co_return co_await std::move(inner) + 1;
}

Task<int> fail_with(std::string message) {
  throw std::invalid_argument(message);
  co_return 0;
}

Task<void> increment(int* counter) {
  ++*counter;
  co_return;
}

Task<long> sum_synchronously(long iterations) {
  long total = 0;
  for (long i = 0; i < iterations; ++i)
    total += co_await forty_two();
  co_return total;
}

Task<void> count_synchronously(int iterations, int* counter) {
  for (int i = 0; i < iterations; ++i)
    co_await increment(counter);
}

using TaskTest = LoopTest;

TEST_F(TaskTest, DeliversItsValueToTheAwaiter) {
  EXPECT_EQ(run(loop(), add_one(forty_two())), 43);
  EXPECT_EQ(run(loop(), concatenate("rate", "limit")), "ratelimit");
}

TEST_F(TaskTest, PropagatesExceptionsToTheAwaiter) {
  EXPECT_THROW(run(loop(), add_one(fail_with("boom"))), std::invalid_argument);
}

TEST_F(TaskTest, IsLazyUntilAwaited) {
  int counter = 0;
  Task<void> task = increment(&counter);
  EXPECT_EQ(counter, 0);
  run(loop(), std::move(task));
  EXPECT_EQ(counter, 1);
}

TEST_F(TaskTest, DestroyedUnstartedTaskNeverRuns) {
  int counter = 0;
  { Task<void> task = increment(&counter); }
  EXPECT_EQ(counter, 0);
}

TEST_F(TaskTest, MoveLeavesTheSourceEmpty) {
  Task<int> first = forty_two();
  Task<int> second = std::move(first);
  EXPECT_FALSE(first.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_TRUE(second.valid());
  EXPECT_EQ(run(loop(), std::move(second)), 42);
}

// Why both loops: g++ 12 does not make symmetric transfer a tail call at -O0 and under ASan;
// the sanitizer build (-O0) runs this same test.
TEST_F(TaskTest, AMillionSynchronousAwaitsDoNotGrowTheStack) {
  EXPECT_EQ(run(loop(), sum_synchronously(1'000'000)), 42'000'000);
  int counter = 0;
  run(loop(), count_synchronously(1'000'000, &counter));
  EXPECT_EQ(counter, 1'000'000);
}

#if !defined(__SANITIZE_ADDRESS__)
TEST(FramePool, AFreedFrameIsReusedForTheNextOfItsSize) {
  void* first = detail::allocate_frame(200);
  detail::free_frame(first, 200);
  void* second = detail::allocate_frame(250);
  EXPECT_EQ(second, first) << "same size class, same thread: the block is reused";
  void* other = detail::allocate_frame(1000);
  EXPECT_NE(other, first);
  detail::free_frame(second, 250);
  detail::free_frame(other, 1000);
}
#endif

}  // namespace
}  // namespace redlimit

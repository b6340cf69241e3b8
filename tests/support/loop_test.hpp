#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>

namespace redlimit::test {

/// A fixture owning one uv loop. Every test that uses it ends by checking that
/// uv_loop_close() returns 0: every handle was closed, nothing leaked.
class LoopTest : public ::testing::Test {
 protected:
  LoopTest() { uv_loop_init(&loop_); }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a uv handle was left open"; }
  uv_loop_t* loop() { return &loop_; }

 private:
  uv_loop_t loop_;
};

/// Scheduling slack for "by its deadline" checks: these machines are shared, and sanitizers slow
/// everything down.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::chrono::milliseconds deadline_slack{150};
#else
inline constexpr std::chrono::milliseconds deadline_slack{50};
#endif

/// Milliseconds elapsed since `start` on the steady clock.
inline std::chrono::milliseconds elapsed_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace redlimit::test

#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <string>

namespace redlimit::test {

/// A fixture owning one uv loop. Every test that uses it ends by checking that
/// uv_loop_close() returns 0: every handle was closed, nothing leaked.
class LoopTest : public ::testing::Test {
 protected:
  LoopTest() { uv_loop_init(&loop_); }
  void TearDown() override {
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a uv handle was left open: " << open_handles();
  }
  /// The types of the handles still open, for the failure message.
  std::string open_handles() {
    std::string names;
    uv_walk(
        &loop_,
        [](uv_handle_t* handle, void* out) {
          *static_cast<std::string*>(out) += std::string(uv_handle_type_name(handle->type)) +
                                             (uv_is_closing(handle) ? "(closing) " : " ");
        },
        &names);
    return names;
  }
  uv_loop_t* loop() { return &loop_; }

 private:
  uv_loop_t loop_;
};

/// How many uv handles are open (or closing) on `loop`.
inline int open_handle_count(uv_loop_t* loop) {
  int count = 0;
  uv_walk(
      loop, [](uv_handle_t*, void* n) { ++*static_cast<int*>(n); }, &count);
  return count;
}

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

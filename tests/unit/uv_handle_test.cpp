// UvHandle: the one way the library owns a uv handle. Init is checked, close() is idempotent,
// and the memory goes in the close callback, which then runs the owner's hook.
#include "runtime/uv_handle.hpp"

#include <gtest/gtest.h>

#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using detail::UvError;
using detail::UvHandle;
using UvHandleTest = test::LoopTest;

/// Counts the hooks run: each handle's close callback, after its memory was freed.
void count_closed(void* closed) noexcept {
  ++*static_cast<int*>(closed);
}

TEST_F(UvHandleTest, IsClosedUntilInitialised) {
  UvHandle<uv_timer_t> timer;
  EXPECT_FALSE(timer.is_open());
  EXPECT_EQ(timer.get(), nullptr);
  EXPECT_EQ(test::open_handle_count(loop()), 0);
}

TEST_F(UvHandleTest, InitOpensTheHandleOnTheLoop) {
  UvHandle<uv_timer_t> timer;
  timer.init(loop(), &uv_timer_init);
  EXPECT_TRUE(timer.is_open());
  EXPECT_EQ(timer.get()->loop, loop());
  EXPECT_EQ(test::open_handle_count(loop()), 1);
  timer.close();
  uv_run(loop(), UV_RUN_DEFAULT);
}

TEST_F(UvHandleTest, CloseTwiceIsHarmless) {
  int closed = 0;
  UvHandle<uv_idle_t> idle;
  idle.init(loop(), &uv_idle_init);
  idle.when_closed(&count_closed, &closed);
  idle.close();
  idle.close();
  EXPECT_FALSE(idle.is_open());
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(closed, 1);
}

TEST_F(UvHandleTest, CloseOfAHandleNeverInitialisedDoesNothing) {
  UvHandle<uv_prepare_t> prepare;
  prepare.close();
  EXPECT_FALSE(prepare.is_open());
  EXPECT_EQ(test::open_handle_count(loop()), 0);
}

TEST_F(UvHandleTest, TheHookRunsOnlyOnceTheCloseCallbackRan) {
  int closed = 0;
  UvHandle<uv_timer_t> timer;
  timer.init(loop(), &uv_timer_init);
  timer.when_closed(&count_closed, &closed);
  timer.close();
  EXPECT_EQ(closed, 0) << "libuv runs close callbacks on the next loop iteration";
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(test::open_handle_count(loop()), 0);
}

TEST_F(UvHandleTest, TheDestructorCloses) {
  int closed = 0;
  {
    UvHandle<uv_timer_t> timer;
    timer.init(loop(), &uv_timer_init);
    timer.when_closed(&count_closed, &closed);
  }
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(closed, 1);
}

TEST_F(UvHandleTest, AFailedInitThrowsUvErrorAndLeavesNothingOpen) {
  UvHandle<uv_tcp_t> tcp;
  constexpr unsigned no_such_flags = 0xff00;
  try {
    tcp.init(loop(), &uv_tcp_init_ex, no_such_flags);
    FAIL() << "uv_tcp_init_ex accepted flags it does not know";
  } catch (const UvError& e) {
    EXPECT_EQ(e.code(), UV_EINVAL);
    EXPECT_NE(std::string(e.what()).find("tcp"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tcp.is_open());
  EXPECT_EQ(test::open_handle_count(loop()), 0);
  tcp.close();
}

TEST_F(UvHandleTest, AFailedInitIsAnError) {
  UvHandle<uv_poll_t> poll;
  const auto refuse = [](uv_loop_t*, uv_poll_t*) { return UV_ENOMEM; };
  EXPECT_THROW(poll.init(loop(), refuse), Error);
  EXPECT_FALSE(poll.is_open());
}

TEST_F(UvHandleTest, OpensAgainAfterClose) {
  int closed = 0;
  UvHandle<uv_timer_t> timer;
  timer.init(loop(), &uv_timer_init);
  timer.when_closed(&count_closed, &closed);
  timer.close();
  timer.init(loop(), &uv_timer_init);
  timer.when_closed(&count_closed, &closed);
  EXPECT_TRUE(timer.is_open());
  timer.close();
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(closed, 2);
}

TEST_F(UvHandleTest, TheHandleCanBeClosedFromItsOwnCallback) {
  UvHandle<uv_timer_t> timer;
  timer.init(loop(), &uv_timer_init);
  timer.get()->data = &timer;
  uv_timer_start(
      timer.get(),
      [](uv_timer_t* fired) { static_cast<UvHandle<uv_timer_t>*>(fired->data)->close(); }, 0, 0);
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_FALSE(timer.is_open());
}

}  // namespace
}  // namespace redlimit

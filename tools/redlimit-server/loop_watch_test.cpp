#include "loop_watch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace redlimit_server {
namespace {

using namespace std::chrono_literals;

/// Whether `condition` holds within 10 s (looked at every millisecond).
template <typename Condition>
bool within_10s(Condition condition) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

void close_and_run(uv_loop_t* loop, std::initializer_list<uv_handle_t*> handles) {
  for (uv_handle_t* handle : handles)
    uv_close(handle, nullptr);
  uv_run(loop, UV_RUN_DEFAULT);
}

TEST(LoopWatch, TellsOnceWhenTheLoopHasInputAndAgainOnlyOnceRearmed) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  uv_async_t wake;
  ASSERT_EQ(uv_async_init(&loop, &wake, [](uv_async_t*) {}), 0);
  run_ready(&loop);
  std::atomic<int> told{0};
  {
    LoopWatch watch(&loop, [&told] { told.fetch_add(1); });
    uv_async_send(&wake);
    ASSERT_TRUE(within_10s([&] { return told.load() == 1; }));
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(told.load(), 1) << "told again before rearm()";

    run_ready(&loop);
    watch.rearm();
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(told.load(), 1) << "told with no input waiting";

    uv_async_send(&wake);
    EXPECT_TRUE(within_10s([&] { return told.load() == 2; }));
    uv_async_send(&wake);
    watch.rearm();
    EXPECT_TRUE(within_10s([&] { return told.load() == 3; }))
        << "input waiting when rearmed is told at once";
  }
  close_and_run(&loop, {reinterpret_cast<uv_handle_t*>(&wake)});
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(RunReady, RegistersAWatcherStartedInAnIoCallbackSoThatTheWatchSeesIt) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);  // readable from the start, never read
  uv_poll_t readable;
  readable.data = &pipe_fds[0];
  uv_async_t wake;
  wake.data = &readable;
  // The async's callback runs in the loop's I/O phase: what it starts is registered with the
  // kernel only at the loop's next poll.
  ASSERT_EQ(uv_async_init(&loop, &wake,
                          [](uv_async_t* async) {
                            auto* poll = static_cast<uv_poll_t*>(async->data);
                            uv_poll_init(async->loop, poll, *static_cast<int*>(poll->data));
                            uv_poll_start(poll, UV_READABLE, [](uv_poll_t*, int, int) {});
                          }),
            0);
  run_ready(&loop);
  std::atomic<int> told{0};
  {
    LoopWatch watch(&loop, [&told] { told.fetch_add(1); });
    uv_async_send(&wake);
    ASSERT_TRUE(within_10s([&] { return told.load() == 1; }));
    run_ready(&loop);  // the async's callback starts watching the pipe
    ASSERT_TRUE(uv_is_active(reinterpret_cast<uv_handle_t*>(&readable)));
    watch.rearm();
    EXPECT_TRUE(within_10s([&] { return told.load() == 2; }))
        << "the pipe waits to be read, but its watcher was not registered with the kernel";
  }
  close_and_run(&loop,
                {reinterpret_cast<uv_handle_t*>(&readable), reinterpret_cast<uv_handle_t*>(&wake)});
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace redlimit_server

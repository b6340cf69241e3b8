#pragma once
/// @file loop_watch.hpp
/// LoopWatch: tells another thread when a libuv loop has I/O ready, so that a thread blocked
/// elsewhere (in a gRPC completion queue) runs the loop only then; run_ready() runs such a loop.

#include <uv.h>

#include <functional>
#include <thread>

namespace redlimit_server {

/// Watches a uv loop's backend descriptor from a thread of its own. When the loop has I/O
/// ready (a Redis reply, a uv_async_send from another thread), it calls `ready` once on that
/// thread, and then waits for rearm() before it tells again. The loop's timers are not its
/// concern: the thread that runs the loop wakes for them itself (uv_backend_timeout()). It sees
/// only the watchers registered with the kernel: run the loop with run_ready().
class LoopWatch {
 public:
  /// Starts watching `loop`; `ready` runs on the watch's thread. Throws std::system_error when
  /// the kernel refuses a descriptor or the thread.
  LoopWatch(uv_loop_t* loop, std::function<void()> ready);
  /// Stops the thread and waits for it: once it returns, `ready` is not called any more.
  ~LoopWatch();
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  /// Watches again after `ready` (any thread; call it once the loop ran after `ready`).
  void rearm();

 private:
  void watch();

  std::function<void()> ready_;
  int loop_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
};

/// Runs what `loop` has ready without blocking (uv_run() with UV_RUN_NOWAIT), and again while a
/// watcher started or changed meanwhile is not yet registered with the kernel, so that a
/// LoopWatch sees every one of them. The loop's thread only.
void run_ready(uv_loop_t* loop);

}  // namespace redlimit_server

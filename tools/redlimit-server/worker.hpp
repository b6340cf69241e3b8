#pragma once
/// @file worker.hpp
/// Worker: one thread with its own libuv loop, redlimit Client and Decider, answering calls
/// handed to it from any thread.

#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "decider.hpp"
#include "redlimit/client.hpp"
#include "server_stats.hpp"

namespace redlimit_server {

/// How a worker connects and answers.
struct WorkerOptions {
  redlimit::ClientOptions client;
  DeciderOptions decider;
  std::shared_ptr<ServerStats> stats;  ///< where each call is counted (null: not counted)
};

/// Runs a loop on its own thread: calls submitted from any thread are decided there, many at
/// once. Its Client's commands to Redis are coalesced across the calls in flight. The calls
/// submitted while the loop is awake are taken together at its next turn, without another
/// wake-up.
class Worker {
 public:
  /// The answer to a call, or the error that ended it.
  using Done = std::function<void(std::exception_ptr error, RateLimitAnswer answer)>;
  /// Work on the worker's loop, with its Decider.
  using Job = std::function<void(Decider& decider, uv_loop_t* loop)>;

  /// Starts the thread; returns once its loop runs. Throws what the Client's options throw
  /// (ConfigError for a malformed URL).
  Worker(WorkerOptions options, std::shared_ptr<const RateLimitConfig> config);
  /// stop(), then waits for the thread.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Decides `call` on the worker's loop; `done` runs on that thread. After stop(), `done` runs
  /// at once on the caller's thread with redlimit::Unavailable. Thread-safe.
  void submit(RateLimitCall call, Done done);
  /// Runs `job` on the worker's loop (dropped after stop()). Thread-safe.
  void post(Job job);
  /// Whether a call submitted now is taken with others, through a wake-up already sent, and
  /// fewer than a Redis batch wait for it (a hint: it may change at once). Thread-safe.
  bool awake() const noexcept { return awake_.load(std::memory_order_relaxed); }
  /// Stops taking calls; the calls in flight end, the Client closes and the thread ends.
  /// Thread-safe, idempotent.
  void stop();

 private:
  /// A call waiting for the loop.
  struct Submitted {
    RateLimitCall call;
    Done done;
  };

  void run(WorkerOptions options, std::shared_ptr<const RateLimitConfig> config);
  static void on_wake(uv_async_t* async);
  /// Starts what was posted and submitted since the last turn (the loop's thread only).
  void take_batch();
  /// Wakes the loop unless a wake-up is already on its way (under mutex_).
  void wake_locked();
  /// Sets what awake() tells (under mutex_).
  void show_awake_locked();

  std::shared_ptr<ServerStats> stats_;

  std::mutex mutex_;
  std::condition_variable started_;
  std::vector<Job> jobs_;         ///< under mutex_, in the order posted
  std::vector<Submitted> calls_;  ///< under mutex_, in the order submitted
  /// A wake-up was sent and the loop has not yet taken all it wakes for (under mutex_): the
  /// calls submitted meanwhile need none of their own.
  bool wake_sent_ = false;
  std::atomic<bool> awake_{false};  ///< what awake() tells, without the lock
  bool stopping_ = false;
  bool running_ = false;
  std::exception_ptr start_error_;
  uv_async_t* wake_ = nullptr;  ///< the loop's wake-up, while it runs (under mutex_)
  // Why pointers: they live on the thread's stack while its loop runs.
  Decider* decider_ = nullptr;
  redlimit::Client* client_ = nullptr;
  uv_loop_t* loop_ = nullptr;
  bool closing_ = false;  ///< the loop's thread only
  // Why members: swapped with jobs_ and calls_ at each turn, so their memory is reused.
  std::vector<Job> taken_jobs_;         ///< the loop's thread only
  std::vector<Submitted> taken_calls_;  ///< the loop's thread only
  std::thread thread_;
};

}  // namespace redlimit_server

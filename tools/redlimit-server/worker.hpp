#pragma once
/// @file worker.hpp
/// Worker: one thread with its own libuv loop, redlimit Client and Decider, answering the calls
/// of its gRPC completion queue and the calls handed to it from any thread.

#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <uv.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "decider.hpp"
#include "redlimit/client.hpp"
#include "redlimit/task_group.hpp"
#include "server_stats.hpp"

namespace redlimit_server {

/// How a worker connects and answers.
struct WorkerOptions {
  redlimit::ClientOptions client;
  DeciderOptions decider;
  std::shared_ptr<ServerStats> stats;  ///< where each call is counted (null: not counted)
};

/// What an event of a worker's gRPC completion queue carries: the work it resumes.
class QueueTag {
 public:
  /// The event came out of the queue, on the worker's thread; `ok` is gRPC's.
  virtual void on_event(bool ok) = 0;

 protected:
  ~QueueTag() = default;
};

/// Where a worker stands with its gRPC completion queue (its thread only).
enum class QueueState {
  serving,   ///< calls are decided
  stopping,  ///< stop() was called: calls are refused, none is requested
  shut,      ///< the queue is shut down: nothing may be started on it
};

/// Runs a loop on its own thread: calls are decided there, many at once, and its Client's
/// commands to Redis are coalesced across the calls in flight. Once serve() gives it a gRPC
/// completion queue, the thread waits on that queue and runs the loop when the loop has work
/// (a LoopWatch tells it), so a gRPC call is taken, decided and answered on one thread. Calls
/// submitted from other threads are taken together at the loop's next turn, through one
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
  /// From now on the thread also takes the events of `queue` (each event's tag a QueueTag, or
  /// the worker's own); `start` runs there first (it requests the first calls). The queue must
  /// outlive the worker; the worker shuts it down and drains it after stop(), once the calls it
  /// decides have ended. Thread-safe; once only, before stop().
  void serve(grpc::ServerCompletionQueue* queue, std::function<void()> start);
  /// Decides `call` here; `done` runs on this thread. The worker's thread only.
  void decide(RateLimitCall call, Done done);
  /// Where the worker stands with its completion queue. The worker's thread only.
  QueueState queue_state() const noexcept;
  /// Stops taking calls; the calls in flight end, the Client closes and the thread ends.
  /// Thread-safe, idempotent. Shut the gRPC server down first: its calls end here.
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
  /// Takes the completion queue's events and runs the loop when it has work, until the queue is
  /// shut down and drained (the loop's thread).
  void serve_queue();

  std::shared_ptr<ServerStats> stats_;

  std::mutex mutex_;
  std::condition_variable started_;
  std::vector<Job> jobs_;         ///< under mutex_, in the order posted
  std::vector<Submitted> calls_;  ///< under mutex_, in the order submitted
  /// A wake-up was sent and the loop has not yet taken all it wakes for (under mutex_): the
  /// calls submitted meanwhile need none of their own.
  bool wake_sent_ = false;
  bool stopping_ = false;
  bool running_ = false;
  std::exception_ptr start_error_;
  uv_async_t* wake_ = nullptr;  ///< the loop's wake-up, while it runs (under mutex_)
  // Why pointers: they live on the thread's stack while its loop runs.
  Decider* decider_ = nullptr;
  redlimit::Client* client_ = nullptr;
  uv_loop_t* loop_ = nullptr;
  bool closing_ = false;  ///< the loop's thread only
  /// The calls being decided (the loop's thread only). Why a group, not spawn(): a call starts
  /// at once, in the turn that took it, with no timer of its own.
  redlimit::TaskGroup deciding_;
  grpc::ServerCompletionQueue* queue_ = nullptr;  ///< set by serve()'s job (the loop's thread)
  bool queue_shut_ = false;                       ///< the loop's thread only
  /// Wakes the thread from the queue when the loop has work (set by the LoopWatch's thread,
  /// again only after that wake-up was taken).
  grpc::Alarm loop_ready_;
  // Why members: swapped with jobs_ and calls_ at each turn, so their memory is reused.
  std::vector<Job> taken_jobs_;         ///< the loop's thread only
  std::vector<Submitted> taken_calls_;  ///< the loop's thread only
  std::thread thread_;
};

}  // namespace redlimit_server

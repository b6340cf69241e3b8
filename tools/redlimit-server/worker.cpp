#include "worker.hpp"

#include <spdlog/spdlog.h>

#include <optional>

#include "loop_watch.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit_server {
namespace {

/// Decides `call`, counts it, and hands the outcome to `done`.
redlimit::Task<void> answer(Decider& decider, ServerStats* stats, RateLimitCall call,
                            Worker::Done done) {
  const std::string domain = stats != nullptr ? call.domain : std::string();
  const bool configured = stats != nullptr && decider.knows(domain);
  std::exception_ptr error;
  RateLimitAnswer answer;
  try {
    answer = co_await decider.decide(std::move(call));
  } catch (...) {
    error = std::current_exception();
  }
  // Why caught here: the worker's group never rethrows what its calls let escape.
  try {
    if (stats != nullptr) {
      stats->count(domain, configured,
                   error                                     ? CallEnd::error
                   : answer.overall_code == Code::over_limit ? CallEnd::over_limit
                                                             : CallEnd::ok);
    }
    done(error, std::move(answer));
  } catch (const std::exception& e) {
    spdlog::error("redlimit-server: a call's answer could not be handed over: {}", e.what());
  }
}

/// The completion queue's events taken at most between two turns of the loop.
constexpr std::size_t events_per_turn = 128;

/// A deadline `ms` milliseconds from now; none for a negative `ms` (uv_backend_timeout()'s).
gpr_timespec deadline_in(int ms) {
  if (ms < 0) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

}  // namespace

Worker::Worker(WorkerOptions options, std::shared_ptr<const RateLimitConfig> config)
    : stats_(options.stats) {
  thread_ = std::thread([this, options = std::move(options), config = std::move(config)]() mutable {
    run(std::move(options), std::move(config));
  });
  std::unique_lock lock(mutex_);
  started_.wait(lock, [this] { return running_ || start_error_; });
  if (start_error_) {
    lock.unlock();
    thread_.join();
    std::rethrow_exception(start_error_);
  }
}

Worker::~Worker() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::run(WorkerOptions options, std::shared_ptr<const RateLimitConfig> config) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  try {
    redlimit::Client client(&loop, std::move(options.client));
    Decider decider(client, std::move(config), std::move(options.decider));
    uv_async_t wake;
    wake.data = this;
    uv_async_init(&loop, &wake, &Worker::on_wake);
    {
      std::lock_guard lock(mutex_);
      decider_ = &decider;
      client_ = &client;
      loop_ = &loop;
      wake_ = &wake;
      running_ = true;
      // Why: a stop() that came first finds the loop through wake_ only from now on.
      if (stopping_) uv_async_send(&wake);
    }
    started_.notify_all();
    uv_run(&loop, UV_RUN_DEFAULT);
    if (queue_ != nullptr) {
      serve_queue();
      uv_run(&loop, UV_RUN_DEFAULT);  // the Client's close, begun by stop()
    }
    decider_ = nullptr;
  } catch (...) {
    std::lock_guard lock(mutex_);
    start_error_ = std::current_exception();
    started_.notify_all();
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handles the Client closed on its way out
  uv_loop_close(&loop);
}

void Worker::on_wake(uv_async_t* async) {
  auto* worker = static_cast<Worker*>(async->data);
  bool stopping = false;
  {
    std::lock_guard lock(worker->mutex_);
    worker->taken_jobs_.swap(worker->jobs_);
    worker->taken_calls_.swap(worker->calls_);
    stopping = worker->stopping_;
    if (stopping) worker->wake_ = nullptr;
  }
  worker->take_batch();
  if (stopping) {
    if (!worker->closing_) {
      worker->closing_ = true;
      uv_close(reinterpret_cast<uv_handle_t*>(async), nullptr);
      // Why close(): the calls in flight end first, then the connections and their handles go,
      // and with them the loop's last work.
      redlimit::spawn(worker->loop_, worker->client_->close());
    }
    return;
  }
  std::lock_guard lock(worker->mutex_);
  // Why the wake-up is marked spent only now: what came while the batch started is taken at the
  // next turn through this one wake-up, not one per submit().
  if (worker->calls_.empty() && worker->jobs_.empty()) {
    worker->wake_sent_ = false;
  } else {
    uv_async_send(async);
  }
}

void Worker::take_batch() {
  // Why the jobs first: a call submitted after a reload's job is decided under its
  // configuration; one submitted before it may be too (they raced anyway).
  for (Job& job : taken_jobs_)
    job(*decider_, loop_);
  taken_jobs_.clear();
  for (Submitted& submitted : taken_calls_)
    decide(std::move(submitted.call), std::move(submitted.done));
  taken_calls_.clear();
}

void Worker::decide(RateLimitCall call, Done done) {
  deciding_.add(answer(*decider_, stats_.get(), std::move(call), std::move(done)));
}

QueueState Worker::queue_state() const noexcept {
  if (queue_shut_) return QueueState::shut;
  return closing_ ? QueueState::stopping : QueueState::serving;
}

void Worker::serve(grpc::ServerCompletionQueue* queue, std::function<void()> start) {
  post([this, queue, start = std::move(start)](Decider&, uv_loop_t* loop) {
    queue_ = queue;
    start();
    // Why: run() then leaves uv_run() for serve_queue(), which runs the loop from now on.
    uv_stop(loop);
  });
}

void Worker::serve_queue() {
  void* const loop_tag = this;
  std::optional<LoopWatch> watch(std::in_place, loop_, [this, loop_tag] {
    loop_ready_.Set(queue_, gpr_time_0(GPR_CLOCK_MONOTONIC), loop_tag);
  });
  for (;;) {
    void* tag = nullptr;
    bool ok = false;
    // Why the time first: the loop's next timer is counted from the loop's cached time.
    uv_update_time(loop_);
    grpc::CompletionQueue::NextStatus status =
        queue_->AsyncNext(&tag, &ok, deadline_in(uv_backend_timeout(loop_)));
    bool loop_ready = false;
    // Why the events ready before the loop's turn: the calls they start go to Redis together.
    // Why at most events_per_turn: under a steady stream of calls the loop's replies and timers
    // (the calls' deadlines) still get their turn.
    for (std::size_t taken = 0; status == grpc::CompletionQueue::GOT_EVENT; ++taken) {
      if (tag == loop_tag) {
        loop_ready = true;
      } else {
        static_cast<QueueTag*>(tag)->on_event(ok);
      }
      if (taken + 1 == events_per_turn) break;
      status = queue_->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    }
    if (status == grpc::CompletionQueue::SHUTDOWN) return;
    run_ready(loop_);
    if (!watch) continue;
    if (closing_ && deciding_.running() == 0) {
      // Why the watch goes first: its alarm may not be set on a queue shut down.
      watch.reset();
      queue_shut_ = true;
      queue_->Shutdown();
    } else if (loop_ready) {
      watch->rearm();
    }
  }
}

void Worker::wake_locked() {
  if (!wake_sent_) {
    wake_sent_ = true;
    uv_async_send(wake_);
  }
}

void Worker::submit(RateLimitCall call, Done done) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      calls_.push_back(Submitted{std::move(call), std::move(done)});
      wake_locked();
      return;
    }
  }
  done(std::make_exception_ptr(redlimit::Unavailable("redlimit-server is shutting down", false)),
       {});
}

void Worker::post(Job job) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  jobs_.push_back(std::move(job));
  wake_locked();
}

void Worker::stop() {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  stopping_ = true;
  if (wake_ != nullptr) uv_async_send(wake_);
}

}  // namespace redlimit_server

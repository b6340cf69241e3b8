#include "worker.hpp"

#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"

namespace redlimit_server {
namespace {

/// The calls one wake-up takes before awake() says no: a Redis batch's (ClientOptions::max_batch
/// by default).
constexpr std::size_t full_batch = 64;

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
  if (stats != nullptr) {
    stats->count(domain, configured,
                 error                                     ? CallEnd::error
                 : answer.overall_code == Code::over_limit ? CallEnd::over_limit
                                                           : CallEnd::ok);
  }
  done(error, std::move(answer));
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
    worker->show_awake_locked();
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
    worker->show_awake_locked();
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
  for (Submitted& submitted : taken_calls_) {
    redlimit::spawn(loop_, answer(*decider_, stats_.get(), std::move(submitted.call),
                                  std::move(submitted.done)));
  }
  taken_calls_.clear();
}

void Worker::wake_locked() {
  if (!wake_sent_) {
    wake_sent_ = true;
    uv_async_send(wake_);
  }
  show_awake_locked();
}

void Worker::show_awake_locked() {
  // Why not once a Redis batch waits: the calls beyond it would wait for that batch's turn, and
  // under a steady load one worker would take every call while the others sleep.
  awake_.store(wake_sent_ && calls_.size() < full_batch, std::memory_order_relaxed);
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

#pragma once
// The "existing application": a libuv program that produces jobs on a timer and hands each to
// a callback. It knows nothing of coroutines or of redlimit.

#include <uv.h>

#include <chrono>
#include <functional>
#include <string>

/// One unit of work for a tenant.
struct Job {
  int id = 0;
  std::string tenant;
};

/// Produces `count` jobs, one every `every`, round-robin over `tenants` tenants.
class JobProducer {
 public:
  JobProducer(uv_loop_t* loop, std::chrono::milliseconds every, int count, int tenants,
              std::function<void(Job)> submit);
  JobProducer(const JobProducer&) = delete;
  JobProducer& operator=(const JobProducer&) = delete;
  /// Closes the timer without waiting for the loop.
  ~JobProducer();

  void start();

 private:
  static void on_tick(uv_timer_t* timer);

  uv_timer_t* timer_;  ///< on the heap: freed in its close callback, which may run after us
  std::chrono::milliseconds every_;
  int count_;
  int tenants_;
  int produced_ = 0;
  std::function<void(Job)> submit_;
};

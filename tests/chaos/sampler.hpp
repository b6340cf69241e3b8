#pragma once
/// @file sampler.hpp
/// A thread that samples, during the run, the server's connection counters (INFO stats) every
/// 250 ms and each live worker's VmRSS and open descriptors every second. With no server (a
/// replicated deployment, whose primary changes), only the workers are sampled.

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "chaos/fleet.hpp"
#include "chaos/run_record.hpp"
#include "support/redis_server.hpp"

namespace redlimit::chaos {

class Sampler {
 public:
  /// Starts sampling at once; counts its own connections in `own_connections`. `redis` may be
  /// null.
  Sampler(const test::RedisServer* redis, const Fleet& fleet,
          std::atomic<long long>& own_connections);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// Stops the thread and hands over the samples.
  void finish(std::vector<ConnectionSample>& connections, std::vector<ProcessSample>& processes);

 private:
  void run();
  void sample_connections();
  void sample_processes();

  const test::RedisServer* redis_;
  const Fleet& fleet_;
  std::atomic<long long>& own_connections_;
  std::atomic<bool> stopping_{false};
  std::vector<ConnectionSample> connections_;
  std::vector<ProcessSample> processes_;
  std::thread thread_;  // Why last: it starts in the constructor and uses every member above
};

}  // namespace redlimit::chaos

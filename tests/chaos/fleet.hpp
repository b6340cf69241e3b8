#pragma once
/// @file fleet.hpp
/// The chaos worker processes: started, replaced when the nemesis kills one, and stopped at the
/// end of the run. Thread-safe (the sampler reads the live PIDs while the nemesis replaces one).

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "chaos/run_record.hpp"

namespace redlimit::chaos {

class Fleet {
 public:
  /// `size` workers of `binary`, on `url`, logging under `log_dir`; seeds derived from `seed`;
  /// `worker_options` after the worker's other arguments (worker.cpp's usage).
  Fleet(std::string binary, std::string url, std::string log_dir, std::uint64_t seed, int size,
        std::vector<std::string> worker_options = {});
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  void start();
  /// Tells worker slot `slot` to start its burst of waiting acquire() calls (SIGUSR1).
  void start_burst(int slot);
  /// SIGKILLs the worker in `slot` and starts a new one in its place.
  void kill_and_replace(int slot);
  /// The worker_kill fault: start_burst(slot), then kill_and_replace(slot) 150 ms later.
  void kill_in_burst(int slot);
  /// SIGTERMs every worker and waits up to `grace_ms` for each; SIGKILLs those still running.
  void stop(int grace_ms);
  /// The index in runs() and the PID of each live worker.
  std::vector<std::pair<int, pid_t>> live() const;
  std::vector<WorkerRun> runs() const;
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  void launch(int slot);

  std::string binary_;
  std::string url_;
  std::string log_dir_;
  std::uint64_t seed_;
  std::vector<std::string> worker_options_;
  mutable std::mutex mutex_;
  std::vector<WorkerRun> runs_;
  std::vector<int> slots_;  // slot -> index in runs_ of its live worker
};

}  // namespace redlimit::chaos

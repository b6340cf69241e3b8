#pragma once
/// @file nemesis.hpp
/// The nemesis: a schedule of faults drawn from a seed (the same seed gives the same schedule),
/// and the code that makes each fault on the run's redis-server and fleet.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "chaos/fleet.hpp"
#include "chaos/run_record.hpp"
#include "support/redis_server.hpp"

namespace redlimit::chaos {

/// One planned fault: what, for how long, the quiet gap after it, and (worker_kill) which slot.
struct Fault {
  FaultKind kind;
  std::chrono::milliseconds length;
  std::chrono::milliseconds gap;
  int victim = -1;
};

/// The quiet time before the first fault, and the shortest gap after each one: longer than the
/// recovery bound (1 s) plus the slack, so that every fault's recovery is measured before the
/// next fault starts.
inline constexpr std::chrono::milliseconds warmup{3000};
inline constexpr std::chrono::milliseconds min_gap{3000};

/// Rounds of every fault of `kinds` in a random order, with random lengths and gaps, filling
/// `run_length` (the last fault's gap ends by then, as planned: a failover takes what the
/// deployment takes). A function of its arguments only.
std::vector<Fault> make_schedule(std::uint64_t seed, std::chrono::milliseconds run_length,
                                 int fleet_size, std::span<const FaultKind> kinds);

/// Makes faults on one server and fleet. Counts every connection it opens in `own_connections`
/// (the connection-rate check subtracts them).
class Nemesis {
 public:
  Nemesis(test::RedisServer& redis, Fleet& fleet, std::atomic<long long>& own_connections)
      : redis_(redis), fleet_(fleet), own_connections_(own_connections) {}

  /// Makes `fault` and undoes it after its length; returns when it did. A restart is appended
  /// to `restarts`.
  FaultRun inject(const Fault& fault, std::vector<Restart>& restarts);

 private:
  Reply admin(const std::vector<std::string>& argv);
  void fill_maxclients(std::chrono::milliseconds length);
  void fill_memory(std::chrono::milliseconds length);

  test::RedisServer& redis_;
  Fleet& fleet_;
  std::atomic<long long>& own_connections_;
};

}  // namespace redlimit::chaos

#pragma once
// One measured case: try_acquire with `in_flight` coroutines over `keys` keys (1: one hot key)
// on `connections` clients, for a fixed time.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/redlimit.hpp"

struct BenchCase {
  redlimit::Algorithm algorithm = redlimit::Algorithm::gcra;
  int in_flight = 1;
  int keys = 100'000;
  int connections = 1;
  double seconds = 2;
  /// ClientOptions::max_batch (1: every decision its own script call).
  int max_batch = 64;
  /// Only keys of these cluster slots (first, last): the keys are the first `keys` indices
  /// whose key falls there, so that one cluster node serves them all. None: every index.
  std::optional<std::pair<std::uint16_t, std::uint16_t>> slots;
  /// The policy's period: 1000 permits per period per key (bench_policy()).
  std::chrono::milliseconds period{1000};
};

struct BenchResult {
  BenchCase config;
  std::int64_t decisions = 0;
  std::int64_t allowed = 0;
  std::int64_t errors = 0;
  double seconds = 0;
  double per_second = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0;
  double client_cpu_us = 0;                    ///< user + system CPU per decision
  std::optional<double> server_usec_per_call;  ///< EVALSHA, from INFO commandstats
  /// The server's EVALSHA time over the decisions: with batches, usec_per_call is per batch.
  std::optional<double> server_usec_per_decision;
  std::optional<double> mean_batch;                ///< decisions per EVALSHA call
  std::optional<double> allocations_per_decision;  ///< heap allocations in this process
  std::optional<double> key_bytes;                 ///< MEMORY USAGE of one limiter key
};

/// The prefix of every key the benchmark writes.
extern const char* const bench_prefix;

/// The policy every case uses: 1000 permits per `period` per key (burst 1000), so that random
/// keys are mostly allowed and the hot key mostly denied. With the default second, a random
/// key's state lasts about a millisecond after its decision, so most decisions find none; a
/// period of 1000 s keeps each key's state for seconds after every decision.
redlimit::Policy bench_policy(redlimit::Algorithm algorithm,
                              std::chrono::milliseconds period = std::chrono::seconds(1));

/// The indices of the first `count` keys of limiter `name` whose cluster slot is in
/// [first, last] (the slot of the key's hash tag, as a cluster routes its decisions).
std::vector<std::uint64_t> indices_in_slots(const std::string& name, int count, std::uint16_t first,
                                            std::uint16_t last);

/// The key of index i: "k" and 12 digits, as redis-benchmark's __rand_int__ writes them (and
/// short enough to need no heap allocation).
std::string bench_key(std::uint64_t index);

/// Runs one case on clients made with `connection` (its url and tls; the case sets max_batch);
/// `admin` (connected to the same server) reads the statistics. The deny cache is off: every
/// decision is a round trip, as the figures intend.
redlimit::Task<BenchResult> run_case(uv_loop_t* loop, redlimit::ClientOptions connection,
                                     redlimit::Client& admin, BenchCase config);

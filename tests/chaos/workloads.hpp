#pragma once
/// @file workloads.hpp
/// The load every chaos worker runs, shared by the worker (which runs it) and the checker (which
/// reads each stream's limit, failure policy and deadline from here).

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "redlimit/redlimit.hpp"

namespace redlimit::chaos {

using namespace std::chrono_literals;

/// How a stream's coroutines call.
enum class Pattern {
  tight,      ///< try_acquire in a loop with no other await
  paced,      ///< try_acquire, then a short sleep
  waiting,    ///< acquire() with max_wait and a stop token, some cancelled, then a short sleep
  semaphore,  ///< Semaphore::acquire(), hold a few ms, release
};

/// One stream of calls in each worker: a limiter (or semaphore) and the coroutines using it.
struct Workload {
  std::string_view name;  ///< the limiter's name; its key is always "k"
  Pattern pattern;
  Limit limit;  ///< for a semaphore: permits = capacity
  FailurePolicy::Kind on_failure;
  int coroutines;
  /// Each call takes n permits, n drawn uniformly from 1 to most_permits, so that a limit
  /// charging n permits as fewer admits more permits than the checker allows.
  std::int64_t most_permits = 1;
};

/// What a worker's client uses: recovery after a restart within 1 s needs reconnect_max < 1 s
/// (docs/failures.md).
inline constexpr std::chrono::milliseconds command_timeout = 250ms;
inline constexpr std::chrono::milliseconds reconnect_max = 500ms;
/// acquire()'s max_wait in the waiting and semaphore streams.
inline constexpr std::chrono::milliseconds max_wait = 1000ms;
/// The lease TTL of the semaphore stream. A lease whose release failed (Redis was away) holds
/// its permits until it expires: shorter than the recovery bound, so that this is not counted
/// as a slow recovery (leases are held 2-10 ms).
inline constexpr std::chrono::milliseconds lease_ttl = 500ms;
/// How many waiting acquire() calls a worker starts on SIGUSR1 (the nemesis does it just before
/// it kills that worker), each for 1 permit with burst_max_wait: a backlog of reservations in
/// Redis.
inline constexpr int burst_calls = 1000;
inline constexpr std::chrono::milliseconds burst_max_wait = 10s;
/// Workers share local_fallback limits by this share.
inline constexpr double local_share = 1.0 / 3;

/// Every stream; a worker logs each under its index.
inline const std::array<Workload, 7> workloads{{
    {"tight", Pattern::tight, Limit::gcra("200/s", 20), FailurePolicy::Kind::fail_closed, 2, 4},
    {"open", Pattern::tight, Limit::token_bucket("100/s", 10), FailurePolicy::Kind::fail_open, 1},
    {"window", Pattern::paced, Limit::fixed_window("100/s"), FailurePolicy::Kind::local_fallback, 2,
     3},
    {"log", Pattern::paced, Limit::sliding_window_log("60/s"), FailurePolicy::Kind::fail_closed, 2,
     2},
    {"counter", Pattern::paced, Limit::sliding_window_counter("60/s"),
     FailurePolicy::Kind::fail_open, 2},
    {"wait", Pattern::waiting, Limit::gcra("400/s", 5), FailurePolicy::Kind::fail_closed, 8, 3},
    {"sem", Pattern::semaphore, Limit::gcra("5/s"), FailurePolicy::Kind::fail_closed, 3},
}};

/// The longest a call of `workload` may take before its deadline (the scheduling slack comes on
/// top): one command for try_acquire; max_wait plus one command for a waiting acquire.
inline std::chrono::milliseconds call_budget(const Workload& workload, bool burst = false) {
  switch (workload.pattern) {
    case Pattern::tight:
    case Pattern::paced:
      return command_timeout;
    case Pattern::waiting:
    case Pattern::semaphore:
      return (burst ? burst_max_wait : max_wait) + command_timeout;
  }
  return command_timeout;
}

}  // namespace redlimit::chaos

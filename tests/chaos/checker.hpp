#pragma once
/// @file checker.hpp
/// The chaos checker: reads every worker's log and the driver's RunRecord after the run and
/// checks the run's promises (see check_run).

#include <chrono>
#include <string>
#include <vector>

#include "chaos/clock_steps.hpp"
#include "chaos/run_record.hpp"

namespace redlimit::chaos {

/// The scheduling slack: added to every deadline and to the recovery bound, because the machine
/// is shared and busy and a deadline's timer fires on the loop's next turn; more under the
/// sanitizers, which slow everything down.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::chrono::milliseconds scheduling_slack{250};
#else
inline constexpr std::chrono::milliseconds scheduling_slack{100};
#endif

/// The tolerances of the checks, each stated once.
struct CheckOptions {
  /// See scheduling_slack.
  std::chrono::milliseconds slack = scheduling_slack;
  /// Admissions from Redis must resume within this of a fault's end (the bound).
  std::chrono::milliseconds recovery_bound{1000};
  /// Connections per second to Redis (received and rejected, the driver's own subtracted, over
  /// windows of at least 1 s), per worker: each worker has a few connections and reconnects with
  /// a backoff from 50 ms, so after a fault it opens a handful; a storm is thousands.
  double connections_per_worker_per_second = 30;
  /// RSS of a worker that ran the whole run: median of the last third <= median of the first
  /// third x (1 + rss_growth) + rss_growth_kb.
  /// Not under the sanitizers: AddressSanitizer's quarantine of freed memory (256 MB) grows the
  /// RSS by itself; LeakSanitizer checks each worker at its exit instead (a leak fails its exit
  /// status, so "did not end cleanly").
#if defined(__SANITIZE_ADDRESS__)
  bool check_rss = false;
#else
  bool check_rss = true;
#endif
  double rss_growth = 0.25;
  long rss_growth_kb = 4096;
  /// Open descriptors: most in the last third <= most in the first third + fd_growth.
  int fd_growth = 2;
  /// A jump of Redis TIME against CLOCK_MONOTONIC beyond this, lasting, is a Redis clock step
  /// (clock_steps.hpp): reported, and each side checked as its own lifetime.
  std::chrono::milliseconds clock_step_tolerance = clock_step_tolerance_default;
};

/// The outcome: every failed check, one line each, and the summary to print.
struct CheckReport {
  std::vector<std::string> failures;
  std::string summary;
};

/// Checks, over all logs:
/// - limits: admissions from Redis (source redis) of each stream, per key, within each Redis
///   lifetime, with tests/support/decision_checker.hpp; across each restart, the two lifetimes
///   together against the bound docs/operations.md ("What losing state costs") documents: one
///   more capacity (plus the permits reserved at the kill, for buckets), one more limit for
///   windows, N more holders for a semaphore. A Redis clock step (clock_steps.hpp) starts a new
///   clock segment: each lifetime of each segment is checked on its own. A lease is held from
///   its grant until its release, or its expiry if it has none (its holder was killed).
///   Admissions of fail_open are counted and reported;
/// - fallback shares: the admissions of a local_fallback stream's fallbacks (fallback_share.hpp):
///   per window, each process within its share (local_share x the limit, rounded down), so the
///   fleet within the sum of its processes' shares;
/// - deadlines: every call ended by its budget (workloads.hpp) plus the slack;
/// - answers: no call but a lease's release raised an error (every fault of the run is about
///   availability, which the failure policy answers);
/// - no call left hanging: every worker that was not killed ended cleanly, with no call running;
/// - recovery: after each fault's end (calls started after it), in every stream, every worker
///   alive across the fault had a decision from Redis again (allowed or denied: a denial is the
///   limit at work, not an outage) and some worker was admitted by Redis again (the key is not
///   held by reservations nobody will use), within the bound plus the slack;
/// - connections per second bounded; RSS and descriptors of the workers flat.
CheckReport check_run(const RunRecord& run, const CheckOptions& options);

}  // namespace redlimit::chaos

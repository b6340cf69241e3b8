#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redlimit/limit.hpp"

namespace redlimit::test {

/// One admitted decision of one key: the server time it used and the permits it took.
struct Admit {
  std::int64_t time_us = 0;
  std::int64_t permits = 1;
};

/// The outcome of a check: ok, or the smallest window that admitted more than the limit allows.
struct CheckResult {
  bool ok = true;
  std::int64_t window_start_us = 0;  ///< the violating window [start, end]
  std::int64_t window_end_us = 0;
  std::int64_t admitted = 0;  ///< permits admitted in it
  std::int64_t allowed = 0;   ///< the most the limit allows in it (rounded down)
  std::string description;    ///< readable: which bound, which window
  explicit operator bool() const { return ok; }
};

/// Checks every admitted decision of one key against the exact bound of `limit`:
/// - gcra, token_bucket: for all i <= j, permits in [t_i, t_j] <= burst + rate x (t_j - t_i);
/// - leaky_bucket: consecutive departures at least permits x period / rate.permits apart;
/// - fixed_window: permits per window <= limit (aligned windows at multiples of the period,
///   anchored windows rebuilt from the admits);
/// - sliding_window_log: permits in every trailing window (t - period, t] <= limit;
/// - sliding_window_counter: permits per aligned window <= limit, and at every admit the
///   weighted estimate rebuilt from the admits before it, plus its permits, <= limit.
/// Admits at the same microsecond count in the system's favour where their order matters.
CheckResult check_admits(const Limit& limit, std::vector<Admit> admits);

/// For a gcra or token_bucket `limit`: the most permits any window [t_i, t_j] of `admits`
/// admitted beyond burst + rate x (t_j - t_i), rounded down; 0 when the limit held. (A failed
/// check_admits() names the shortest violating window, whose excess is mostly 1: this is how
/// far the limit was exceeded.)
std::int64_t largest_excess(const Limit& limit, std::vector<Admit> admits);

/// The admits a hammer process (tests/redis/hammer.cpp) wrote to `path`.
std::vector<Admit> read_hammer_admits(const std::string& path);

/// The most permits `limit` could ever admit between the first and the last admit's time, for
/// efficiency figures (admitted / possible).
std::int64_t most_admissible(const Limit& limit, std::int64_t first_us, std::int64_t last_us);

/// One admitted decision of one key of a limiter that follows a stored policy: the server time it
/// used, the permits it took and the policy version it was decided under
/// (Decision::policy_version).
struct VersionedAdmit {
  std::int64_t time_us = 0;
  std::int64_t permits = 1;
  std::int64_t policy_version = 0;
};

/// One version of the policy a key follows: the policy, the Redis time it was stored at, and how
/// the key's state carried over from the version before.
struct PolicyVersion {
  std::int64_t version = 0;
  Policy policy;
  std::int64_t since_us = 0;
  Carry carry = Carry::as_is;
};

/// The transition mode: checks one key's admitted decisions against the history of its policy
/// (versions in increasing order; the first one starts the key afresh). It fails when
/// (a) the versions used on one state (a limit's algorithm and position: its key in Redis) go
///     back in server-time order, or a version is used before it was stored;
/// (b) an admission later than since_v + `propagation_bound` uses a version older than v;
/// (c) the admissions made under version v or newer, from since_v on, do not fit version v's
///     limits, counting what was admitted before since_v as v's carry says. Per limit position:
///     - gcra, token_bucket, leaky_bucket: a bucket of v's capacity and rate that holds, at
///       since_v, the permits A available then under the version before, not rounded (as_is:
///       min(A, capacity), proportional: A x capacity / old capacity, reset: full); a
///       leaky_bucket is checked as such a bucket of capacity burst (its try_acquire spacing is
///       stricter still);
///     - fixed_window (aligned): the old window holding since_v carries its count into the new
///       window holding since_v (proportional: scaled by new limit / old limit rounding up;
///       reset: 0), unless old admissions after since_v moved the stored window on;
///     - sliding_window_counter: the old current and previous windows' counts land in the newest
///       new window (current or previous) they overlap, when the new window holding since_v
///       admitted under v;
///     - sliding_window_log: every admission still in the log counts (reset: none at or before
///       since_v).
///     A position whose algorithm or window kind changed starts afresh. Admissions of older
///     versions after since_v count only where the implementation surely saw them (a log entry),
///     so an implementation that converts at since_v from a state that includes them, or that is
///     stricter in any other way, passes. An anchored fixed window after a carried change is not
///     checked (its windows depend on requests that were denied).
/// Each version's own admissions, also those after the next change, are checked against its model.
CheckResult check_transitions(std::vector<PolicyVersion> history,
                              std::vector<VersionedAdmit> admits,
                              std::chrono::microseconds propagation_bound);

}  // namespace redlimit::test

#pragma once

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

/// The most permits `limit` could ever admit between the first and the last admit's time, for
/// efficiency figures (admitted / possible).
std::int64_t most_admissible(const Limit& limit, std::int64_t first_us, std::int64_t last_us);

}  // namespace redlimit::test

#pragma once
/// @file fallback_share.hpp
/// The chaos checker's check of what local fallbacks admit while Redis cannot answer: each
/// process's fallback applies every limit scaled to `local_share` of its permits, rounded down,
/// 1 at least (docs/failures.md, "Failure policies"; src/limiter/fallback_policy.hpp), so per
/// window a process admits at most its share, and a fleet of N processes N shares.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/limit.hpp"

namespace redlimit::chaos {

/// One admission by a process's local fallback. It has no Redis time: the fallback decided it
/// by the system clock at some moment from `from_us` to `to_us` (its call's start and end).
struct FallbackAdmit {
  std::size_t process = 0;  ///< the worker (log) that made it
  std::size_t segment = 0;  ///< its clock segment (checker.hpp): segments are checked apart
  std::int64_t from_us = 0;
  std::int64_t to_us = 0;
  std::int64_t permits = 1;
};

/// The most permits one process's fallback may admit of `limit` in a window of its period:
/// `share` x its permits rounded down, 1 at least. 0 when this check does not apply: only the
/// window algorithms whose every epoch-aligned window of the period holds at most the limit are
/// checked (an aligned fixed_window, sliding_window_log, sliding_window_counter); a bucket's
/// fallback rate and an anchored window are not.
std::int64_t fallback_share(const Limit& limit, double share);

/// The outcome: every failed check, one line each, and the stream's summary (one line part).
struct ShareReport {
  std::vector<std::string> failures;
  std::string summary;
};

/// Checks the fallback admissions of stream `stream` (limit `limit`, `share`), placing each in
/// the epoch-aligned window of the limit's period that holds both ends of its call: one whose
/// call spanned two windows is not placed (counted in the summary). Per clock segment and window:
/// - each process admitted at most fallback_share(limit, share) permits;
/// - the fleet at most that times the processes that admitted in the window.
/// `run_start_us` is the system clock at the run's start, for the times the lines name.
ShareReport check_fallback_shares(std::string_view stream, const Limit& limit, double share,
                                  const std::vector<FallbackAdmit>& admits,
                                  std::int64_t run_start_us);

}  // namespace redlimit::chaos

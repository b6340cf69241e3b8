#pragma once
// Sliding window log: the model of lua/algorithms/sliding_window_log.lua.

#include <cstdint>
#include <deque>
#include <optional>

#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// The largest rate.permits the log accepts: its memory and work grow with the limit.
inline constexpr std::int64_t sliding_log_max_permits = 10'000;

struct SlidingWindowLogParams {
  std::int64_t limit;      ///< permits in any trailing window
  std::int64_t window_us;  ///< window length
};

/// The time of every admitted permit, oldest first (a sorted set in Redis), and the stamp (the
/// member "stamp:<limit>:<window>:<pv>" with score 0 in Redis; {limit, window, 0, pv}).
struct SlidingWindowLogState {
  std::deque<std::int64_t> times;
  std::optional<Stamp> stamp;  ///< nullopt: written by a release without stamps
};

/// Decides `n` permits at `now`. When allowed and `next` is not null, `*next` becomes `*state` (or
/// empty) with the permits outside the window dropped and n entries added; pass the same object as
/// `state` to update in place. A state that stamp_rule() restamps (other parameters, another policy
/// version of a store, or a reset due), or without a stamp, is carried over first (its times apply
/// to the new window and limit as they are; a reset due drops those at or before the change's time,
/// once) and is then written under the new stamp also when denied (`rewritten`). A state of a newer
/// policy version refuses the request (`stale_version`) and is not written.
LimitOutcome decide_sliding_window_log(const SlidingWindowLogParams& params,
                                       const PolicyChange& change,
                                       const SlidingWindowLogState* state, std::int64_t now,
                                       std::int64_t n, SlidingWindowLogState* next);

}  // namespace redlimit::detail

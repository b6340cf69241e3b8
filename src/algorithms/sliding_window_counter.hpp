#pragma once
// Sliding window counter: the model of lua/algorithms/sliding_window_counter.lua.

#include <cstdint>
#include <optional>

#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

struct SlidingWindowCounterParams {
  std::int64_t limit;      ///< permits per window
  std::int64_t period_us;  ///< window length; windows are aligned to multiples of it
};

/// Counts of the window starting at start_us and of the one before it:
/// "start:current:previous:limit:period:pv" in Redis; the stamp is {limit, period, 0, pv}.
struct SlidingWindowCounterState {
  std::int64_t start_us = 0;
  std::int64_t current = 0;
  std::int64_t previous = 0;
  std::optional<Stamp> stamp;  ///< nullopt: written by a release without stamps
};

/// Decides `n` permits at `now`. A state that stamp_rule() restamps (other parameters, another
/// policy version of a store, or a reset due), or without a stamp, is carried over first (its
/// current and previous windows' counts each land in the newest new window they overlap, as the
/// rule's carry says; when an old-version write rolled the counters on after the change's since,
/// each window the state held at since that it rolled past lands so too, counted as full) and is
/// then written under the new stamp also when denied (`rewritten`). A state of a newer policy
/// version refuses the request (`stale_version`) and is not written.
LimitOutcome decide_sliding_window_counter(const SlidingWindowCounterParams& params,
                                           const PolicyChange& change,
                                           const SlidingWindowCounterState* state, std::int64_t now,
                                           std::int64_t n, SlidingWindowCounterState* next);

}  // namespace redlimit::detail

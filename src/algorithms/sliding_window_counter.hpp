#pragma once
// Sliding window counter: the model of lua/algorithms/sliding_window_counter.lua.

#include <cstdint>

#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

struct SlidingWindowCounterParams {
  std::int64_t limit;      ///< permits per window
  std::int64_t period_us;  ///< window length; windows are aligned to multiples of it
};

/// Counts of the window starting at start_us and of the one before it.
struct SlidingWindowCounterState {
  std::int64_t start_us = 0;
  std::int64_t current = 0;
  std::int64_t previous = 0;
};

LimitOutcome decide_sliding_window_counter(const SlidingWindowCounterParams& params,
                                           const PolicyChange& change,
                                           const SlidingWindowCounterState* state, std::int64_t now,
                                           std::int64_t n, SlidingWindowCounterState* next);

}  // namespace redlimit::detail

#pragma once
// Fixed window: the model of lua/algorithms/fixed_window.lua.

#include <cstdint>

#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

struct FixedWindowParams {
  std::int64_t limit;      ///< permits per window
  std::int64_t period_us;  ///< window length
  bool anchored;           ///< window starts at the first request, else at multiples of period
};

struct FixedWindowState {
  std::int64_t start_us = 0;
  std::int64_t count = 0;
};

LimitOutcome decide_fixed_window(const FixedWindowParams& params, const PolicyChange& change,
                                 const FixedWindowState* state, std::int64_t now, std::int64_t n,
                                 FixedWindowState* next);

}  // namespace redlimit::detail

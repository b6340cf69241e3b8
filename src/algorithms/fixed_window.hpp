#pragma once
// Fixed window: the model of lua/algorithms/fixed_window.lua.

#include <cstdint>
#include <optional>

#include "algorithms/outcome.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

struct FixedWindowParams {
  std::int64_t limit;      ///< permits per window
  std::int64_t period_us;  ///< window length
  bool anchored;           ///< window starts at the first request, else at multiples of period
};

/// "start:count:limit:period:anchored:pv" in Redis; the stamp is {limit, period, anchored, pv}
/// (pv: the version field, stamp_rule()).
struct FixedWindowState {
  std::int64_t start_us = 0;
  std::int64_t count = 0;
  std::optional<Stamp> stamp;  ///< nullopt: written by a release without stamps ("start:count")
};

/// Decides `n` permits at `now`. A state that stamp_rule() restamps (other parameters, another
/// policy version of a store, or a reset due), or without a stamp, is carried over first (its
/// window's count lands in the new window holding the decision's time when the two overlap, as the
/// rule's carry says; a stored window that started after the change's since, by an old-version
/// write, adds the window that held since, lost with its count, as full where it meets the new
/// window); it is then written under the new stamp also when denied (`rewritten`). A state of a
/// newer policy version refuses the request (`stale_version`) and is not written.
LimitOutcome decide_fixed_window(const FixedWindowParams& params, const PolicyChange& change,
                                 const FixedWindowState* state, std::int64_t now, std::int64_t n,
                                 FixedWindowState* next);

}  // namespace redlimit::detail

#pragma once
// GCRA: the model of lua/algorithms/gcra.lua (see there for the algorithm).

#include <cstdint>

#include "algorithms/exact.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/reservation_book.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// Emission interval d/p microseconds (a rate in lowest terms) and capacity in permits.
struct GcraParams {
  std::int64_t p;
  std::int64_t d;
  std::int64_t burst;
};

/// The theoretical arrival time, with its fraction in 1/den microseconds, and the key's
/// reservation bookkeeping (kept by decisions; see algorithms/reservations.hpp).
struct GcraState {
  FracTime tat;
  std::int64_t den = 1;
  ReservationBook book;
  CancelLog cancel_log;
};

/// Decides `n` permits at `now` under the policy in force `change` (its since_us resolved:
/// at most now); when allowed and `next` is not null, writes the new state there (it may be
/// `state` itself). A state stamped with other parameters is carried over to these
/// (`rewritten`; with `next`, written even when denied); one stamped with a newer policy
/// version refuses the request (`stale_version`, nothing written). decide_policy writes a
/// rewritten state of a denied request by deciding again with n = 0 (the state carried over,
/// nothing taken). The other algorithms follow the same convention.
LimitOutcome decide_gcra(const GcraParams& params, const PolicyChange& change,
                         const GcraState* state, std::int64_t now, std::int64_t n, GcraState* next);

/// The stored time of a GCRA or leaky bucket state, or now if that is later. A state stored
/// under another denominator is rounded up to a whole microsecond (never frees permits).
FracTime load_frac_time(const GcraState* state, std::int64_t now, std::int64_t p);

}  // namespace redlimit::detail

#pragma once
// Reservations for acquire(): the models of lua/reservations/*.lua, for single-limit policies of
// gcra, token_bucket and leaky_bucket. Each reservation and each cancellation increments the
// key's version; a reservation's version is its place in the queue, and a cancellation's
// version orders it against reservations (see lua/reservations/cancel.lua).

#include <cstdint>
#include <optional>

#include "algorithms/exact.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/policy_model.hpp"

namespace redlimit::detail {

/// True for the algorithms that can reserve (gcra, token_bucket, leaky_bucket).
bool can_reserve(Algorithm algorithm) noexcept;

struct ReserveOutcome {
  /// allowed: reserved (the caller waits wait_us); else nothing was written and retry_after is
  /// the wait the request would have had.
  LimitOutcome decision;
  std::int64_t wait_us = 0;
  FracTime slot;             ///< when the permits may be used (fraction in 1/p us)
  std::int64_t version = 0;  ///< the reservation's version: its place in the key's queue
};

/// Reserves `n` permits at the earliest slot within `max_wait_us` and writes the new state.
ReserveOutcome reserve(const LimitSpec& spec, std::optional<LimitState>& state, std::int64_t now,
                       std::int64_t n, std::int64_t max_wait_us);

struct CancelOutcome {
  bool returned = false;     ///< false: the slot was already due; nothing changed
  FracTime shift;            ///< how much earlier the reservations behind it may move
  std::int64_t version = 0;  ///< the cancellation's version (orders it against reservations)
  std::int64_t ttl_us = 0;   ///< how long the new state matters
};

/// The slot of a reservation made under denominator `den`, for a limit whose reduced permits are
/// `p` now: unchanged, or rounded down to a whole microsecond when the policy changed since (so
/// it can only look due sooner: a cancellation then returns nothing, never too much).
FracTime slot_for(FracTime slot, std::int64_t den, std::int64_t p) noexcept;

/// Gives back a reservation of `n` permits at `slot` (fraction in 1/den) if the slot is still in
/// the future.
CancelOutcome cancel_reservation(const LimitSpec& spec, std::optional<LimitState>& state,
                                 std::int64_t now, std::int64_t n, FracTime slot, std::int64_t den);

}  // namespace redlimit::detail

#pragma once
// Reservations for acquire(): the models of lua/reservations/*.lua, for single-limit policies of
// gcra, token_bucket and leaky_bucket. A key keeps the bookkeeping of its reservations and a log
// of its recent cancellations (algorithms/reservation_book.hpp, lua/reservations/cancel.lua).

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
  FracTime slot;         ///< when the permits may be used (fraction in 1/p us)
  ReservationBook book;  ///< the key's, after it (its version is the reservation's place)
};

/// Reserves `n` permits at the earliest slot within `max_wait_us` and writes the new state.
ReserveOutcome reserve(const LimitSpec& spec, std::optional<LimitState>& state, std::int64_t now,
                       std::int64_t n, std::int64_t max_wait_us);

/// What a cancellation did.
enum class CancelVerdict {
  returned,  ///< the permits went back; the reservations behind may move earlier by `shift`
  due,       ///< the slot has come: the permits were used, nothing changed
  refused,   ///< the key was reset since the reservation: nothing changed
};

/// The reservation to cancel, as its reply described it.
struct CancelTicket {
  FracTime slot;                    ///< its slot as reserved
  std::int64_t den = 1;             ///< the denominator of the slot's fraction
  std::int64_t version = 0;         ///< its place in the key's queue
  std::int64_t epoch = 0;           ///< the key's epoch
  std::int64_t cancels_before = 0;  ///< the key's cancels when it was made
};

struct CancelOutcome {
  CancelVerdict verdict = CancelVerdict::refused;
  FracTime shift;           ///< returned: how much earlier the reservations behind it may move
  ReservationBook book;     ///< returned: the key's, after it (cancels counts this one)
  std::int64_t ttl_us = 0;  ///< returned: how long the new state matters
};

/// The slot of a reservation made under denominator `den`, for a limit whose reduced permits are
/// `p`: unchanged, or rounded down to a whole microsecond under another policy (it may then look
/// due up to 1 us early). acquire() cancels under its reservation's own policy: always unchanged.
FracTime slot_for(FracTime slot, std::int64_t den, std::int64_t p) noexcept;

/// Gives a reservation back if its slot, moved earlier by the cancellations ahead of it since it
/// was made, is still ahead.
CancelOutcome cancel_reservation(const LimitSpec& spec, std::optional<LimitState>& state,
                                 std::int64_t now, std::int64_t n, const CancelTicket& ticket);

}  // namespace redlimit::detail

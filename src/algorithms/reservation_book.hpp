#pragma once
// What a key that acquire() reserved on keeps about its reservations: the C++ twin of the
// bookkeeping in lua/reservations/cancel.lua.

#include <cstdint>
#include <vector>

#include "algorithms/exact.hpp"

namespace redlimit::detail {

/// All 0 on a key nobody reserved on. `version` counts the key's reservations (a reservation's
/// version is its place in the queue), `cancels` its returned cancellations, and `epoch` is the
/// time of its first reservation (a key deleted and created again starts a new epoch).
struct ReservationBook {
  std::int64_t version = 0;
  std::int64_t cancels = 0;
  std::int64_t epoch = 0;

  friend bool operator==(const ReservationBook&, const ReservationBook&) = default;
};

/// How much longer than its state matters Redis keeps a key whose book has a reservation
/// (version > 0), in milliseconds, and an entry of its log of cancellations past its backlog's
/// end: lua/lib/reserved_grace.lua, where the reason is, and LOG_GRACE_US in
/// lua/reservations/cancel.lua.
inline constexpr std::int64_t reserved_grace_ms = 1000;

/// A returned cancellation, kept while a reservation made before it may still be pending, and
/// reserved_grace_ms more.
struct LoggedCancel {
  std::int64_t number = 0;          ///< the key's cancels, this one included
  std::int64_t cancelled = 0;       ///< the version of the cancelled reservation
  FracTime shift;                   ///< how much earlier the reservations behind it moved
  std::int64_t den = 1;             ///< the denominator of the shift's fraction
  std::int64_t backlog_end_us = 0;  ///< every reservation made before it is due by then

  friend bool operator==(const LoggedCancel&, const LoggedCancel&) = default;
};

/// The key's recent cancellations, oldest first (lua: the sorted set `<key>:cancels`).
using CancelLog = std::vector<LoggedCancel>;

}  // namespace redlimit::detail

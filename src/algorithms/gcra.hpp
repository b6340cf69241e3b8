#pragma once
// GCRA: the model of lua/algorithms/gcra.lua (see there for the algorithm).

#include <cstdint>
#include <optional>

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
  /// The parameters {p, d, burst} and the version field (stamp_rule()) it was written under
  /// (den is p); nullopt for a value of the previous release (lib/frac_time.lua).
  std::optional<Stamp> stamp;
  /// The time (now) of the write that stored it; nullopt for a value of an earlier release.
  /// One later than now is a clock step back (load_frac_time).
  std::optional<std::int64_t> written_us;
};

/// Decides `n` permits at `now` under the policy in force `change`; when allowed and `next` is
/// not null, writes the new state there (it may be `state` itself). A state that stamp_rule()
/// restamps is carried over to these parameters as load_frac_time() says (`rewritten`; with
/// `next`, written even when denied); one stamped with a newer policy version refuses the
/// request (`stale_version`, nothing written). With n = 0, `next` is always
/// written: the state as loaded (carried over, nothing taken). decide_policy writes a rewritten
/// state of a denied request so, and adjust_policy loads the state it adjusts so. The other
/// algorithms follow the same convention.
LimitOutcome decide_gcra(const GcraParams& params, const PolicyChange& change,
                         const GcraState* state, std::int64_t now, std::int64_t n, GcraState* next);

/// A GCRA or leaky bucket state as a decision under the policy in force reads it.
struct LoadedTime {
  FracTime time;  ///< the stored time (carried over), or now if that is later
  /// It was stamped otherwise, or not at all, or the clock stepped back: write it back.
  bool rewritten = false;
  std::int64_t stale_version = 0;  ///< stamped with a newer policy version: refuse
  std::int64_t stamp_version = 0;  ///< the version field of the stamp a write carries
};

/// The longest wait a reservation made at `now` may have: its slot is at most 2^52 us since the
/// epoch (the year 2112), so every time the scripts and models compute from it, the state's own
/// horizon added, stays an exact integer (below 2^53). About 85 years in 2026. It is also how
/// far a reserved GCRA key's TAT may legitimately run ahead of now + tau (lua/algorithms/gcra.lua).
constexpr std::int64_t longest_reservation_wait_us(std::int64_t now) noexcept {
  return max_exact - now;
}

/// What a GCRA-shaped state's stored time is, which decides how a change of parameters carries
/// it over and how far ahead of now it may legitimately be.
enum class StoredTime {
  /// GCRA's TAT: compared with now + tau, so it holds the permits available (burst - its
  /// backlog); a key acquire() reserved on may hold it up to longest_reservation_wait_us ahead.
  tat,
  /// A leaky bucket's next departure: compared with now alone, so it holds the queue; a
  /// reservation is part of the queue.
  next_departure,
};

/// The stored time of a GCRA or leaky bucket state at `now` under `params` and `change`, as
/// lua/lib/load_frac_time.lua reads it. A state that stamp_rule() restamps is carried over at
/// change_time() when its parameters differ or the rule's carry is a reset, with the rule's
/// carry: a TAT, and a next departure carried proportionally or reset, holds the permits
/// available then, which become carry_permits() of them, and the time is rebuilt then holding
/// those; a next departure carried as is keeps the permits queued then, which depart at the new
/// rate from then. Another version of the same parameters is only restamped. A state without a
/// stamp is read as before (stored under another denominator: rounded up to a whole microsecond,
/// which never frees permits). A state written later than now (written_us) is a clock step
/// back: its time moves back by written_us - now (the backlog of the write is kept, measured
/// from the write) and it is rewritten. In a state without written_us, a time later than
/// now + burst*T (a TAT on a key with reservations: plus longest_reservation_wait_us) is a
/// clock step back: it is taken as that time and rewritten.
LoadedTime load_frac_time(const GcraParams& params, const PolicyChange& change,
                          const GcraState* state, std::int64_t now, StoredTime kind);

/// The stamp a state written under `params` carries, with the version field `version`
/// (LoadedTime::stamp_version).
inline Stamp stamp_of(const GcraParams& params, std::int64_t version) noexcept {
  return {params.p, params.d, params.burst, version};
}

}  // namespace redlimit::detail

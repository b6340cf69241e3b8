#include "algorithms/reservations.hpp"

#include <algorithm>
#include <utility>
#include <variant>

#include "algorithms/leaky_bucket.hpp"

namespace redlimit::detail {
namespace {

/// The state of alternative State, created (empty) if absent or of another kind.
template <class State>
State& writable(std::optional<LimitState>& state) {
  if (!state || !std::holds_alternative<State>(*state)) state.emplace(State{});
  return std::get<State>(*state);
}

template <class State>
const State* stored(const std::optional<LimitState>& state) {
  return state ? std::get_if<State>(&*state) : nullptr;
}

/// How many stale log entries one cancellation removes at most (lua: LOG_PRUNE_MAX).
constexpr std::size_t log_prune_max = 16;

/// The bookkeeping after a reservation at `now` (a first one starts an epoch).
ReservationBook reserved(const ReservationBook& book, std::int64_t now) {
  if (book.version == 0) return {1, 0, now};
  return {book.version + 1, book.cancels, book.epoch};
}

/// Writes the bookkeeping after a reservation; a new epoch voids the old log.
template <class State>
void write_book(State& state, const ReservationBook& book) {
  state.book = book;
  if (book.version == 1) state.cancel_log.clear();
}

/// Completes an allowed gcra or leaky-bucket reservation of the slot `slot`, `wait` away: the
/// decision's TTL and reset, and the stored time moved to `after` with the new bookkeeping and
/// a stamp with the version field `stamp_version` (LoadedTime's).
void grant_at(ReserveOutcome& out, std::optional<LimitState>& state, FracTime after,
              const GcraParams& params, std::int64_t stamp_version, std::int64_t now,
              const ReservationBook& book, std::int64_t wait, FracTime slot) {
  out.decision.ttl_us = subtract(after, {now, 0}, params.p).ceil_us();
  out.decision.reset_after_us = out.decision.ttl_us;
  out.wait_us = wait;
  out.slot = slot;
  out.book = reserved(book, now);
  GcraState& written = writable<GcraState>(state);
  written.tat = after;
  written.den = params.p;
  written.stamp = stamp_of(params, stamp_version);
  written.written_us = now;
  write_book(written, out.book);
}

/// A denied gcra or leaky-bucket reservation on a state carried over to this policy writes it
/// back, converted (`time`), with nothing taken, stamped with the version field `stamp_version`.
void rewrite_time(ReserveOutcome& out, std::optional<LimitState>& state, FracTime time,
                  const GcraParams& params, std::int64_t stamp_version, std::int64_t now) {
  out.decision.rewritten = true;
  out.decision.ttl_us = std::max<std::int64_t>(1, subtract(time, {now, 0}, params.p).ceil_us());
  GcraState& written = writable<GcraState>(state);
  written.tat = time;
  written.den = params.p;
  written.stamp = stamp_of(params, stamp_version);
  written.written_us = now;
}

/// Removes the oldest entries whose backlog end passed over reserved_grace_ms ago (lua:
/// LOG_GRACE_US).
void prune(CancelLog& log, std::int64_t now) {
  constexpr std::int64_t grace_us = reserved_grace_ms * 1000;
  std::size_t removed = 0;
  while (removed < log_prune_max && removed < log.size() &&
         log[removed].backlog_end_us + grace_us <= now)
    ++removed;
  log.erase(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(removed));
}

/// True if the log, up to entry `ceiling`, holds a returned cancellation of the ticket's
/// reservation.
bool logged(const CancelLog& log, const CancelTicket& ticket, std::int64_t ceiling) {
  return std::any_of(log.begin(), log.end(), [&](const LoggedCancel& entry) {
    return entry.number > ticket.cancels_before && entry.number <= ceiling &&
           entry.cancelled == ticket.version;
  });
}

/// The slot now of the ticket's reservation (its slot in 1/p us), or nullopt when an entry it
/// needs was removed (it is due).
std::optional<FracTime> current_slot(const CancelLog& log, std::int64_t cancels, FracTime slot,
                                     std::int64_t p, const CancelTicket& ticket) {
  if (ticket.cancels_before >= cancels) return slot;
  const auto first = std::find_if(log.begin(), log.end(), [&](const LoggedCancel& entry) {
    return entry.number > ticket.cancels_before;
  });
  const auto last = std::find_if(first, log.end(),
                                 [&](const LoggedCancel& entry) { return entry.number > cancels; });
  if (last - first < cancels - ticket.cancels_before) return std::nullopt;
  for (auto entry = first; entry != last; ++entry) {
    if (entry->cancelled >= ticket.version) continue;
    // A shift under another policy counts in whole microseconds, rounded down.
    const FracTime shift = entry->den == p ? entry->shift : FracTime{entry->shift.us, 0};
    slot = subtract(slot, shift, p);
  }
  return slot;
}

/// The verdict on cancelling `ticket` (its slot in the limit's denominator) on a key whose state
/// is `current` (null: none), pruning the key's log on the way.
template <class State>
CancelVerdict verdict_for(State* current, std::int64_t now, FracTime slot, std::int64_t p,
                          const CancelTicket& ticket, std::optional<std::int64_t> log_ceiling) {
  const ReservationBook book = current != nullptr ? current->book : ReservationBook{};
  if (book.version == 0 || book.epoch != ticket.epoch || ticket.version > book.version ||
      ticket.cancels_before > book.cancels) {
    return CancelVerdict::refused;
  }
  prune(current->cancel_log, now);
  const std::int64_t cancels = log_ceiling.value_or(book.cancels);
  // Cancelled twice: the first is still logged (once pruned, the slot has passed: due).
  if (ticket.cancels_before < cancels && logged(current->cancel_log, ticket, cancels))
    return CancelVerdict::already_returned;
  const auto at = current_slot(current->cancel_log, cancels, slot, p, ticket);
  return at && FracTime{now, 0} < *at ? CancelVerdict::returned : CancelVerdict::due;
}

ReserveOutcome stale_reservation(std::int64_t stored_version) {
  ReserveOutcome out;
  out.decision.stale_version = stored_version;
  return out;
}

CancelOutcome stale_cancel(std::int64_t stored_version) {
  CancelOutcome out;
  out.stale_version = stored_version;
  return out;
}

CancelOutcome refused_or_due(CancelVerdict verdict) {
  CancelOutcome out;
  out.verdict = verdict;
  return out;
}

std::int64_t remaining_after(FracTime latest, FracTime left, std::int64_t p, std::int64_t d) {
  const Int128 room = static_cast<Int128>(latest.us - left.us) * p + latest.frac - left.frac;
  return room > 0 ? static_cast<std::int64_t>(room / d) : 0;
}

ReserveOutcome reserve_gcra(const GcraParams& params, const PolicyChange& change,
                            std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                            std::int64_t max_wait, std::int64_t not_before) {
  const std::int64_t p = params.p;
  const GcraState* current = stored<GcraState>(state);
  const LoadedTime loaded = load_frac_time(params, change, current, now, StoredTime::tat);
  if (loaded.stale_version != 0) return stale_reservation(loaded.stale_version);
  const FracTime tat = loaded.time;
  const ReservationBook book = current != nullptr ? current->book : ReservationBook{};
  // Permits arriving at not_before move the TAT on from there.
  const FracTime from = tat.us < not_before ? FracTime{not_before, 0} : tat;
  const FracTime after = add(from, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  FracTime slot{after.us - capacity.us, after.frac - capacity.frac};
  if (slot.frac < 0) slot = {slot.us - 1, slot.frac + p};
  if (slot.us < now) slot = {now, 0};
  if (slot.us < not_before) slot = {not_before, 0};
  const std::int64_t wait = FracTime{slot.us - now, slot.frac}.ceil_us();
  const FracTime latest{now + capacity.us, capacity.frac};

  ReserveOutcome out;
  out.book = book;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait) {
    out.decision.remaining = remaining_after(latest, tat, p, params.d);
    out.decision.retry_after_us = subtract(after, latest, p).ceil_us();
    out.decision.reset_after_us = subtract(tat, {now, 0}, p).ceil_us();
    if (loaded.rewritten) rewrite_time(out, state, tat, params, loaded.stamp_version, now);
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = remaining_after(latest, after, p, params.d);
  grant_at(out, state, after, params, loaded.stamp_version, now, book, wait, slot);
  return out;
}

ReserveOutcome reserve_token_bucket(const TokenBucketParams& params, const PolicyChange& change,
                                    std::optional<LimitState>& state, std::int64_t now,
                                    std::int64_t n, std::int64_t max_wait,
                                    std::int64_t not_before) {
  const std::int64_t full = params.burst * params.d;
  const TokenBucketState* current = stored<TokenBucketState>(state);
  const Tokens tokens = load_tokens(params, change, current, now);
  if (tokens.stale_version != 0) return stale_reservation(tokens.stale_version);
  const std::int64_t level = tokens.level;
  const ReservationBook book = current != nullptr ? current->book : ReservationBook{};
  // Permits arriving at not_before take from what the bucket holds then (at most full): at most
  // full - (not_before - now) * p now.
  std::int64_t charged = level;
  if (not_before > now) {
    const std::int64_t span = not_before - now;
    if (span > max_exact / params.p) {
      charged = -max_exact;  // a debt no value keeps exact: denied below
    } else {
      charged = std::min(charged, full - span * params.p);
    }
  }
  const std::int64_t after = charged - n * params.d;
  FracTime slot{now, 0};
  if (after < 0) slot = {now + (-after) / params.p, (-after) % params.p};
  if (slot.us < not_before) slot = {not_before, 0};
  const std::int64_t wait = FracTime{slot.us - now, slot.frac}.ceil_us();

  ReserveOutcome out;
  out.book = book;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait || -after > max_debt(full)) {
    out.decision.remaining = level > 0 ? level / params.d : 0;
    out.decision.retry_after_us = wait;
    out.decision.reset_after_us = ceil_div(full - level, params.p);
    if (tokens.rewritten) {  // carried over to this policy: written back, nothing taken
      out.decision.rewritten = true;
      out.decision.ttl_us = std::max<std::int64_t>(1, out.decision.reset_after_us);
      TokenBucketState& written = writable<TokenBucketState>(state);
      written.level = level;
      written.last_us = now;
      written.den = params.d;
      written.stamp = stamp_of(params, tokens.stamp_version);
    }
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = after > 0 ? after / params.d : 0;
  out.decision.reset_after_us = ceil_div(full - after, params.p);
  out.decision.ttl_us = out.decision.reset_after_us;
  out.wait_us = wait;
  out.slot = slot;
  out.book = reserved(book, now);
  TokenBucketState& written = writable<TokenBucketState>(state);
  written.level = after;
  written.last_us = now;
  written.den = params.d;
  written.stamp = stamp_of(params, tokens.stamp_version);
  write_book(written, out.book);
  return out;
}

ReserveOutcome reserve_leaky_bucket(const LeakyBucketParams& params, const PolicyChange& change,
                                    std::optional<LimitState>& state, std::int64_t now,
                                    std::int64_t n, std::int64_t max_wait,
                                    std::int64_t not_before) {
  const std::int64_t p = params.p;
  const GcraState* current = stored<GcraState>(state);
  const LoadedTime loaded =
      load_frac_time(params, change, current, now, StoredTime::next_departure);
  if (loaded.stale_version != 0) return stale_reservation(loaded.stale_version);
  // Permits arriving at not_before depart no earlier, and the queue is counted from then.
  const FracTime free = loaded.time.us < not_before ? FracTime{not_before, 0} : loaded.time;
  const std::int64_t arrival = std::max(now, not_before);
  const ReservationBook book = current != nullptr ? current->book : ReservationBook{};
  const FracTime after = add(free, scaled(n, params.d, p), p);
  const FracTime capacity = scaled(params.burst, params.d, p);
  const std::int64_t wait = FracTime{free.us - now, free.frac}.ceil_us();

  ReserveOutcome out;
  out.book = book;
  out.decision.limit = params.burst;
  out.decision.now_us = now;
  if (wait > max_wait || FracTime{arrival + capacity.us, capacity.frac} < after) {
    out.decision.remaining = leaky_remaining({free.us - now, free.frac}, params);
    out.decision.retry_after_us = wait;
    out.decision.reset_after_us = wait;
    if (loaded.rewritten) rewrite_time(out, state, loaded.time, params, loaded.stamp_version, now);
    return out;
  }
  out.decision.allowed = true;
  out.decision.remaining = leaky_remaining({after.us - now, after.frac}, params);
  grant_at(out, state, after, params, loaded.stamp_version, now, book, wait, free);
  return out;
}

/// How far the waiters behind a returned cancellation of `n` permits move, and the denominator
/// of its fraction: the reservation's own step, or the step the key got back under the limit in
/// force (d/p per permit) if that is shorter; equal steps keep the reservation's denominator
/// (lua/reservations/cancel.lua, waiters_shift).
std::pair<FracTime, std::int64_t> waiters_shift(std::int64_t n, std::int64_t d, std::int64_t p,
                                                const CancelTicket& ticket) {
  // d/p < ticket.d/ticket.den, exactly: the products may pass 2^63.
  if (static_cast<Int128>(d) * ticket.den < static_cast<Int128>(ticket.d) * p)
    return {scaled(n, d, p), p};
  return {scaled(n, ticket.d, ticket.den), ticket.den};
}

/// Logs a returned cancellation that moves the waiters behind by `shift` (in 1/p us) and
/// returns the outcome.
template <class State>
CancelOutcome log_cancel(State& current, FracTime shift, std::int64_t p, std::int64_t version,
                         std::int64_t backlog_end_us) {
  CancelOutcome out;
  out.verdict = CancelVerdict::returned;
  out.shift = shift;
  out.den = p;
  out.book = {current.book.version, current.book.cancels + 1, current.book.epoch};
  current.book = out.book;
  current.cancel_log.push_back({.number = out.book.cancels,
                                .cancelled = version,
                                .shift = shift,
                                .den = p,
                                .backlog_end_us = backlog_end_us});
  return out;
}

CancelOutcome cancel_frac_time(const GcraParams& params, const PolicyChange& change,
                               std::optional<LimitState>& state, std::int64_t now, std::int64_t n,
                               const CancelTicket& ticket, StoredTime kind,
                               std::optional<std::int64_t> log_ceiling) {
  const std::int64_t p = params.p;
  GcraState* current = state ? std::get_if<GcraState>(&*state) : nullptr;
  const LoadedTime loaded = load_frac_time(params, change, current, now, kind);
  if (loaded.stale_version != 0) return stale_cancel(loaded.stale_version);
  const CancelVerdict verdict =
      verdict_for(current, now, ticket.slot, ticket.den, ticket, log_ceiling);
  if (verdict != CancelVerdict::returned) return refused_or_due(verdict);
  const FracTime time = loaded.time;
  // The key gets its permits back in the terms of the policy in force, not before now (at most
  // its capacity); the waiters behind move by that step or the reservation's, the shorter.
  const auto [shift, den] = waiters_shift(n, params.d, p, ticket);
  CancelOutcome out = log_cancel(*current, shift, den, ticket.version, time.ceil_us());
  FracTime back = subtract(time, scaled(n, params.d, p), p);
  if (!(FracTime{now, 0} < back)) back = {now, 0};
  out.ttl_us = std::max<std::int64_t>(1, subtract(back, {now, 0}, p).ceil_us());
  current->tat = back;
  current->den = p;
  current->stamp = stamp_of(params, loaded.stamp_version);
  current->written_us = now;
  return out;
}

CancelOutcome cancel_token_bucket(const TokenBucketParams& params, const PolicyChange& change,
                                  std::optional<LimitState>& state, std::int64_t now,
                                  std::int64_t n, const CancelTicket& ticket,
                                  std::optional<std::int64_t> log_ceiling) {
  const std::int64_t full = params.burst * params.d;
  TokenBucketState* current = state ? std::get_if<TokenBucketState>(&*state) : nullptr;
  const Tokens tokens = load_tokens(params, change, current, now);
  if (tokens.stale_version != 0) return stale_cancel(tokens.stale_version);
  const CancelVerdict verdict =
      verdict_for(current, now, ticket.slot, ticket.den, ticket, log_ceiling);
  if (verdict != CancelVerdict::returned) return refused_or_due(verdict);
  const std::int64_t level = tokens.level;
  // The backlog ends when the debt is paid.
  const std::int64_t backlog_end = level < 0 ? now + ceil_div(-level, params.p) : now;
  const auto [shift, den] = waiters_shift(n, params.d, params.p, ticket);
  CancelOutcome out = log_cancel(*current, shift, den, ticket.version, backlog_end);
  const std::int64_t back = std::min(full, level + n * params.d);
  out.ttl_us = std::max<std::int64_t>(1, ceil_div(full - back, params.p));
  current->level = back;
  current->last_us = now;
  current->den = params.d;
  current->stamp = stamp_of(params, tokens.stamp_version);
  return out;
}

}  // namespace

bool can_reserve(Algorithm algorithm) noexcept {
  return algorithm == Algorithm::gcra || algorithm == Algorithm::token_bucket ||
         algorithm == Algorithm::leaky_bucket;
}

ReserveOutcome reserve(const LimitSpec& spec, std::optional<LimitState>& state, std::int64_t now,
                       std::int64_t n, std::int64_t max_wait_us, PolicyChange change,
                       std::int64_t not_before_us) {
  max_wait_us = std::min(max_wait_us, longest_reservation_wait_us(now));
  switch (spec.algorithm) {
    case Algorithm::gcra:
      return reserve_gcra({spec.a, spec.b, spec.c}, change, state, now, n, max_wait_us,
                          not_before_us);
    case Algorithm::token_bucket:
      return reserve_token_bucket({spec.a, spec.b, spec.c}, change, state, now, n, max_wait_us,
                                  not_before_us);
    case Algorithm::leaky_bucket:
      return reserve_leaky_bucket({spec.a, spec.b, spec.c}, change, state, now, n, max_wait_us,
                                  not_before_us);
    default:
      return {};
  }
}

StandingOutcome reservation_standing(const std::optional<LimitState>& state,
                                     const CancelTicket& ticket) {
  const StandingOutcome unknown{ReservationStanding::unknown, ticket.slot};
  if (!state) return unknown;
  return std::visit(
      [&](const auto& current) -> StandingOutcome {
        if constexpr (requires { current.cancel_log; }) {
          const ReservationBook& book = current.book;
          if (book.epoch != ticket.epoch || ticket.version > book.version ||
              ticket.cancels_before > book.cancels) {
            return unknown;
          }
          if (ticket.cancels_before == book.cancels)
            return {ReservationStanding::as_reserved, ticket.slot, book.cancels};
          if (logged(current.cancel_log, ticket, book.cancels))
            return {ReservationStanding::given_back, ticket.slot, book.cancels};
          const auto at =
              current_slot(current.cancel_log, book.cancels, ticket.slot, ticket.den, ticket);
          if (!at) return unknown;
          return {ReservationStanding::moved, *at, book.cancels};
        } else {
          return unknown;
        }
      },
      *state);
}

CancelOutcome cancel_reservation(const LimitSpec& spec, std::optional<LimitState>& state,
                                 std::int64_t now, std::int64_t n, const CancelTicket& ticket,
                                 PolicyChange change, std::optional<std::int64_t> log_ceiling) {
  switch (spec.algorithm) {
    case Algorithm::gcra:
      return cancel_frac_time({spec.a, spec.b, spec.c}, change, state, now, n, ticket,
                              StoredTime::tat, log_ceiling);
    case Algorithm::leaky_bucket:
      return cancel_frac_time({spec.a, spec.b, spec.c}, change, state, now, n, ticket,
                              StoredTime::next_departure, log_ceiling);
    case Algorithm::token_bucket:
      return cancel_token_bucket({spec.a, spec.b, spec.c}, change, state, now, n, ticket,
                                 log_ceiling);
    default:
      return {};
  }
}

}  // namespace redlimit::detail

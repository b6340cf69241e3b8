#pragma once
// Token bucket: the model of lua/algorithms/token_bucket.lua.

#include <cstdint>
#include <optional>

#include "algorithms/exact.hpp"
#include "algorithms/outcome.hpp"
#include "algorithms/reservation_book.hpp"
#include "algorithms/stamp.hpp"

namespace redlimit::detail {

/// Refill p tokens per d microseconds (lowest terms), capacity `burst` tokens.
struct TokenBucketParams {
  std::int64_t p;
  std::int64_t d;
  std::int64_t burst;
};

/// Tokens in units of 1/den token (negative: a debt of reservations), the time they were
/// counted, and the key's reservation bookkeeping (kept by decisions).
struct TokenBucketState {
  std::int64_t level = 0;
  std::int64_t last_us = 0;
  std::int64_t den = 1;
  ReservationBook book;
  CancelLog cancel_log;
  /// The parameters {p, d, burst} and the version field (stamp_rule()) it was written under
  /// (den is d); nullopt for a value of the previous release (lib/load_tokens.lua).
  std::optional<Stamp> stamp;
};

/// The most debt a token level may carry (keeps every script value exact).
inline std::int64_t max_debt(std::int64_t full) noexcept {
  return max_exact - full;
}

/// The tokens at now after refilling.
struct Tokens {
  std::int64_t level = 0;  ///< at now, refilled
  /// Stamped otherwise, or not at all, or the clock stepped back: write it back.
  bool rewritten = false;
  std::int64_t stale_version = 0;  ///< stamped with a newer policy version: refuse
  std::int64_t stamp_version = 0;  ///< the version field of the stamp a write carries
};
/// The tokens as lua/lib/load_tokens.lua reads them under `params` and `change`: a state that
/// stamp_rule() restamps is carried over at change_time() when its parameters differ or the
/// rule's carry is a reset (its whole permits then become carry_permits() of them, refilled at
/// the new rate from then; a state last written after that time is first projected back to it,
/// see carry_over in token_bucket.cpp); another version of the same parameters is only
/// restamped. A last refill later than now is a clock step back: it is taken as now (no refill
/// for the step) and rewritten.
Tokens load_tokens(const TokenBucketParams& params, const PolicyChange& change,
                   const TokenBucketState* state, std::int64_t now);

/// The stamp a state written under `params` carries, with the version field `version`
/// (Tokens::stamp_version).
inline Stamp stamp_of(const TokenBucketParams& params, std::int64_t version) noexcept {
  return {params.p, params.d, params.burst, version};
}

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const PolicyChange& change,
                                 const TokenBucketState* state, std::int64_t now, std::int64_t n,
                                 TokenBucketState* next);

}  // namespace redlimit::detail

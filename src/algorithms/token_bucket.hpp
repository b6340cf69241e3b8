#pragma once
// Token bucket: the model of lua/algorithms/token_bucket.lua.

#include <cstdint>

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
};

/// The most debt a token level may carry (keeps every script value exact).
inline std::int64_t max_debt(std::int64_t full) noexcept {
  return max_exact - full;
}

/// The tokens at max(now, last) after refilling, and that time.
struct Tokens {
  std::int64_t level;
  std::int64_t time_us;
};
Tokens load_tokens(const TokenBucketParams& params, const TokenBucketState* state,
                   std::int64_t now);

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const PolicyChange& change,
                                 const TokenBucketState* state, std::int64_t now, std::int64_t n,
                                 TokenBucketState* next);

}  // namespace redlimit::detail

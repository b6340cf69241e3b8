#pragma once
// Token bucket: the model of lua/algorithms/token_bucket.lua.

#include <cstdint>

#include "algorithms/outcome.hpp"

namespace redlimit::detail {

/// Refill p tokens per d microseconds (lowest terms), capacity `burst` tokens.
struct TokenBucketParams {
  std::int64_t p;
  std::int64_t d;
  std::int64_t burst;
};

/// Tokens in units of 1/den token, and the time they were counted.
struct TokenBucketState {
  std::int64_t level = 0;
  std::int64_t last_us = 0;
  std::int64_t den = 1;
};

LimitOutcome decide_token_bucket(const TokenBucketParams& params, const TokenBucketState* state,
                                 std::int64_t now, std::int64_t n, TokenBucketState* next);

}  // namespace redlimit::detail

#include "limiter/fallback_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "algorithms/exact.hpp"
#include "limiter/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

std::int64_t scale(std::int64_t value, double share) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(value * share)));
}

bool is_bucket(Algorithm algorithm) {
  return algorithm == Algorithm::gcra || algorithm == Algorithm::token_bucket ||
         algorithm == Algorithm::leaky_bucket;
}

/// `limit`'s rate times `share` as p' per d x k microseconds (d its reduced period), with the
/// largest k up to the rate's own factor for which burst x d x k stays exact: the rate is then
/// exactly share x the original where the original allows, and just below it elsewhere.
// Why not simply share x permits per the same period: 999 per second reduces to 999/1,000,000,
// so with a burst of 1e10 the product passes 2^52 where 1000/s (1 per 1,000 us) did not.
Limit scaled_bucket(const Limit& limit, double share) {
  const std::int64_t permits = limit.rate.permits;
  const std::int64_t period = limit.rate.period.count();
  const std::int64_t factor = std::gcd(permits, period);
  const std::int64_t p = permits / factor;
  const std::int64_t d = period / factor;
  const std::int64_t burst = scale(limit.burst == 0 ? permits : limit.burst, share);
  const std::int64_t most_exact = max_exact / (burst * d);
  const std::int64_t k =
      std::max<std::int64_t>(1, std::min({factor, most_exact, max_period_us / d}));
  Limit out = limit;
  out.rate.permits = scale(p * k, share);
  out.rate.period = std::chrono::microseconds(d * k);
  out.burst = burst;
  return out;
}

}  // namespace

Policy fallback_policy(const Policy& policy, double share) {
  Policy out = policy;
  for (Limit& limit : out.limits) {
    if (is_bucket(limit.algorithm)) {
      limit = scaled_bucket(limit, share);
    } else {
      limit.rate.permits = scale(limit.rate.permits, share);
    }
  }
  return out;
}

}  // namespace redlimit::detail

#include "limiter/fallback_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "algorithms/exact.hpp"
#include "algorithms/reservations.hpp"
#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

std::int64_t scale(std::int64_t value, double share) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(value * share)));
}

/// `limit`'s rate times `share` as p' per d x k microseconds (d its reduced period): k is the
/// rate's own factor when that leaves p' three digits or more (so "1000/s" x 0.5 is "500/s"),
/// else larger, as far as burst x d x k stays exact, so that a slow rate is still scaled (1/s x
/// 0.5 is 1 per 2 s, not 1 per second).
// Why not simply share x permits per the same period: 999 per second reduces to 999/1,000,000,
// so with a burst of 1e10 the product passes 2^52 where 1000/s (1 per 1,000 us) did not.
Limit scaled_bucket(const Limit& limit, double share) {
  const std::int64_t permits = limit.rate.permits;
  const std::int64_t period = limit.rate.period.count();
  const std::int64_t factor = std::gcd(permits, period);
  const std::int64_t p = permits / factor;
  const std::int64_t d = period / factor;
  const std::int64_t burst = scale(limit.burst == 0 ? permits : limit.burst, share);
  const std::int64_t most = std::max<std::int64_t>(
      1, std::min({max_exact / (burst * d), max_period_us / d, max_exact / p}));
  std::int64_t k = std::min(factor, most);
  const double precise_enough = 1000;
  if (static_cast<double>(p) * static_cast<double>(k) * share < precise_enough) {
    const double wanted = std::ceil(precise_enough / (static_cast<double>(p) * share));
    k = std::min(most, std::max(k, static_cast<std::int64_t>(std::min(wanted, 1e18))));
  }
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
    if (can_reserve(limit.algorithm)) {  // a bucket
      limit = scaled_bucket(limit, share);
    } else {
      limit.rate.permits = scale(limit.rate.permits, share);
    }
  }
  return out;
}

}  // namespace redlimit::detail

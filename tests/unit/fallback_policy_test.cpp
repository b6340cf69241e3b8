// The in-process policy of local_fallback: share x each limit, never more, and always a policy
// the limiter accepts.
#include "limiter/fallback_policy.hpp"

#include <gtest/gtest.h>

#include <random>

#include "algorithms/exact.hpp"
#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

using namespace std::chrono_literals;

/// Whether `scaled`'s rate is at most `share` x `original`'s; a window keeps one permit at least,
/// and nothing is slower than about one permit per the longest period.
bool at_most_share_of(const Limit& scaled, const Limit& original, double share) {
  const long double left = static_cast<long double>(scaled.rate.permits) *
                           static_cast<long double>(original.rate.period.count());
  const long double right = share * static_cast<long double>(original.rate.permits) *
                            static_cast<long double>(scaled.rate.period.count());
  const bool window = scaled.algorithm == Algorithm::fixed_window ||
                      scaled.algorithm == Algorithm::sliding_window_log ||
                      scaled.algorithm == Algorithm::sliding_window_counter;
  const bool slowest = scaled.rate.permits == 1 && scaled.rate.period.count() * 2 > max_period_us;
  return left <= right * (1 + 1e-15L) || (scaled.rate.permits == 1 && (window || slowest));
}

TEST(FallbackPolicy, TakesTheShareOfEachLimit) {
  const Policy policy{Limit::gcra("1000/s", 20), Limit::fixed_window("1000/day")};
  const Policy half = fallback_policy(policy, 0.5);
  EXPECT_EQ(half.limits[0].rate.permits * 1s, 500 * half.limits[0].rate.period);
  EXPECT_EQ(half.limits[0].burst, 10);
  EXPECT_EQ(half.limits[1], Limit::fixed_window("500/day"));
}

TEST(FallbackPolicy, ScalesASlowRateByLengtheningItsPeriod) {
  const Policy policy{Limit::gcra("1/s", 5)};
  const Policy half = fallback_policy(policy, 0.5);
  EXPECT_TRUE(at_most_share_of(half.limits[0], policy.limits[0], 0.5)) << to_string(half);
  EXPECT_GE(half.limits[0].rate.permits * 2'000'000,
            half.limits[0].rate.period.count() * 999 / 1000)
      << "about half, not less: " << to_string(half);
}

TEST(FallbackPolicy, KeepsACapacityOfAtLeastOnePermit) {
  const Policy tiny =
      fallback_policy(Policy{Limit::token_bucket("1/s", 1), Limit::fixed_window("1/s")}, 0.01);
  EXPECT_EQ(tiny.limits[0].burst, 1);
  EXPECT_TRUE(at_most_share_of(tiny.limits[0], Limit::token_bucket("1/s", 1), 0.01));
  EXPECT_EQ(tiny.limits[1], Limit::fixed_window("1/s")) << "a window holds one permit at least";
}

// Issue 14, bug 5: 999/s reduces to 999 per 1,000,000 us, and with a burst of 1e10 the scripts'
// product burst x period passed 2^52, where 1000/s (1 per 1,000 us) did not.
TEST(FallbackPolicy, StaysExactWhereTheOriginalIs) {
  const Policy policy{Limit::gcra("1000/s", 10'000'000'000)};
  const Policy scaled = fallback_policy(policy, 0.999);
  EXPECT_NO_THROW(CompiledPolicy::compile(scaled));
  EXPECT_TRUE(at_most_share_of(scaled.limits[0], policy.limits[0], 0.999));
  EXPECT_LE(scaled.limits[0].burst, 9'990'000'000);
}

TEST(FallbackPolicy, EveryAcceptedPolicyHasAnAcceptedFallbackOfAtMostItsShare) {
  std::mt19937_64 random(14);
  const std::vector<std::int64_t> periods = {
      1, 7, 1'000, 999'983, 1'000'000, 60'000'000, 3'600'000'000, 86'400'000'000, max_period_us};
  const std::vector<double> shares = {1.0, 0.999, 0.75, 0.5, 0.333, 0.01, 1e-6};
  int checked = 0;
  for (int i = 0; i < 20'000; ++i) {
    Limit limit;
    limit.algorithm = static_cast<Algorithm>(random() % 6);
    limit.rate.permits = static_cast<std::int64_t>(random() % 1'000'000'000'000) + 1;
    if (random() % 2) limit.rate.permits = static_cast<std::int64_t>(random() % 10'000) + 1;
    limit.rate.period = std::chrono::microseconds(periods[random() % periods.size()]);
    limit.burst = random() % 3 == 0 ? 0 : static_cast<std::int64_t>(random() % 100'000'000'000);
    try {
      CompiledPolicy::compile(Policy{limit});
    } catch (const std::exception&) {
      continue;  // not a policy a limiter accepts
    }
    const double share = shares[random() % shares.size()];
    const Policy scaled = fallback_policy(Policy{limit}, share);
    ASSERT_NO_THROW(CompiledPolicy::compile(scaled)) << to_string(Policy{limit}) << " x " << share;
    EXPECT_TRUE(at_most_share_of(scaled.limits[0], limit, share))
        << to_string(Policy{limit}) << " x " << share << " -> " << to_string(scaled);
    ++checked;
  }
  EXPECT_GT(checked, 5'000);
}

}  // namespace
}  // namespace redlimit::detail

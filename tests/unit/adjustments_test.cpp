// The adjust model (src/algorithms/adjustments.cpp) on inputs the differential draws rarely.

#include "algorithms/adjustments.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "algorithms/exact.hpp"
#include "policy/compiled_policy.hpp"

namespace redlimit::detail {
namespace {

constexpr std::int64_t t0 = 1'800'000'000'000'000;  // a microsecond timestamp in 2027

// Why: a block's amount is a duration in microseconds, not permits; a give-back's permit step
// (amount x period) computed from it overflowed 64 bits (UndefinedBehaviorSanitizer caught it).
TEST(Adjustments, ALongBlockOnAPerHourLeakyBucketIsComputedWithoutAPermitStep) {
  const auto compiled = CompiledPolicy::compile(
      Policy::of(Limit{Algorithm::leaky_bucket, Rate{1, std::chrono::hours(1)}, 1}));
  std::vector<std::optional<LimitState>> states(1);
  const std::int64_t block_us = std::int64_t{3'090'063'298};
  const AdjustOutcome out =
      adjust_policy(compiled->specs(), states, t0, Adjustment::block, block_us);
  ASSERT_TRUE(out.applied);
  EXPECT_EQ(std::get<GcraState>(*states[0]).tat, (FracTime{t0 + block_us, 0}));
}

}  // namespace
}  // namespace redlimit::detail

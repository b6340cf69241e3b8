// The RateLimit-Policy, RateLimit, Retry-After and X-RateLimit fields written from a Policy and
// a Decision (redlimit/ratelimit_fields.hpp).
#include "redlimit/ratelimit_fields.hpp"

#include <gtest/gtest.h>

#include "redlimit/errors.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

Decision admitted(std::int64_t remaining, std::chrono::microseconds reset_after,
                  std::size_t binding = 0) {
  Decision decision;
  decision.allowed = true;
  decision.remaining = remaining;
  decision.reset_after = reset_after;
  decision.binding = binding;
  decision.source = Source::redis;
  return decision;
}

Decision denied(std::chrono::microseconds retry_after, std::size_t binding = 0,
                Source source = Source::redis) {
  Decision decision;
  decision.allowed = false;
  decision.retry_after = retry_after;
  decision.reset_after = retry_after + 1s;
  decision.binding = binding;
  decision.source = source;
  return decision;
}

TEST(QuotaPolicy, AWholeSecondsPeriodIsTheWindowAndThePermitsTheQuota) {
  EXPECT_EQ(quota_policy("rate", Limit::gcra("100/min", 10)), (QuotaPolicy{"rate", 100, 60}));
  EXPECT_EQ(quota_policy("daily", Limit::fixed_window("1000/day")),
            (QuotaPolicy{"daily", 1000, 86400}));
}

TEST(QuotaPolicy, APeriodOfPartSecondsIsScaledToTheShortestWholeWindow) {
  EXPECT_EQ(quota_policy("fast", Limit::gcra("5/250ms")), (QuotaPolicy{"fast", 20, 1}));
  EXPECT_EQ(quota_policy("odd", Limit::gcra("3/700ms")), (QuotaPolicy{"odd", 30, 7}));
  EXPECT_EQ(quota_policy("half", Limit::gcra("1/1500ms")), (QuotaPolicy{"half", 2, 3}));
}

TEST(QuotaPolicy, ANameThatIsNotPrintableAsciiIsRefused) {
  EXPECT_THROW(quota_policy("tab\there", Limit::gcra("1/s")), InvalidArgument);
  EXPECT_THROW(quota_policy("caf\xc3\xa9", Limit::gcra("1/s")), InvalidArgument);
}

TEST(RateLimitFields, AnAdmissionListsEveryQuotaAndTheBindingOnesRemainder) {
  const Policy policy{Limit::fixed_window("1000/day"), Limit::gcra("10/s")};
  const auto fields = ratelimit_fields(policy, admitted(9, 1'200ms, 1),
                                       {.names = {"daily", "rate"}, .partition = "key:alice"});
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0],
            (HeaderField{"RateLimit-Policy", R"("daily";q=1000;w=86400, "rate";q=10;w=1)"}));
  EXPECT_EQ(fields[1].name, "RateLimit");
  EXPECT_TRUE(fields[1].value.starts_with(R"("rate";r=9;t=2;pk=:)")) << fields[1].value;
  EXPECT_TRUE(fields[1].value.ends_with("=:")) << "8 bytes are 12 base64 characters, one '='";
}

TEST(RateLimitFields, ADenialAddsRetryAfterAndTellsTheWaitAsT) {
  const Policy policy{Limit::gcra("10/s")};
  const auto fields = ratelimit_fields(policy, denied(2'100ms), {.names = {"rate"}});
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[1], (HeaderField{"RateLimit", R"("rate";r=0;t=3)"}));
  EXPECT_EQ(fields[2], (HeaderField{"Retry-After", "3"}));
}

TEST(RateLimitFields, AFailurePolicysAnswerClaimsNoRemainingQuota) {
  const Policy policy{Limit::gcra("10/s")};
  const auto closed = ratelimit_fields(policy, denied(1s, 0, Source::fail_closed),
                                       {.names = {"rate"}, .x_ratelimit = true});
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0].name, "RateLimit-Policy");
  EXPECT_EQ(closed[1], (HeaderField{"Retry-After", "1"}));
  Decision open = admitted(0, 0us);
  open.source = Source::fail_open;
  EXPECT_EQ(ratelimit_fields(policy, open).size(), 1u);
}

TEST(RateLimitFields, UnnamedLimitsAreNamedByTheirRate) {
  const auto fields = ratelimit_fields(Policy{Limit::gcra("100/min")}, admitted(99, 600ms));
  EXPECT_EQ(fields[0].value, R"("100/1min";q=100;w=60)");
}

TEST(RateLimitFields, TheXRateLimitFieldsTellTheBindingQuota) {
  const Policy policy{Limit::fixed_window("1000/day"), Limit::gcra("10/s")};
  const auto fields = ratelimit_fields(policy, denied(500ms, 1), {.x_ratelimit = true});
  ASSERT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields[3], (HeaderField{"X-RateLimit-Limit", "10"}));
  EXPECT_EQ(fields[4], (HeaderField{"X-RateLimit-Remaining", "0"}));
  EXPECT_EQ(fields[5], (HeaderField{"X-RateLimit-Reset", "1"}));
}

TEST(RateLimitFields, ABindingLimitOutsideThePolicyIsRefused) {
  EXPECT_THROW(ratelimit_fields(Policy{Limit::gcra("1/s")}, admitted(0, 1s, 1)), InvalidArgument);
}

TEST(RateLimitFields, QuotasKeptByTheCallerGiveTheSameFieldsAsThePolicy) {
  const Policy policy{Limit::fixed_window("1000/day"), Limit::gcra("10/s")};
  const std::vector<QuotaPolicy> quotas = {quota_policy("daily", policy.limits[0]),
                                           quota_policy("rate", policy.limits[1])};
  for (const Decision& decision : {admitted(9, 1'200ms, 1), denied(500ms, 0)}) {
    const RateLimitFieldOptions named{.names = {"daily", "rate"}, .x_ratelimit = true};
    EXPECT_EQ(ratelimit_fields(quotas, decision, {.x_ratelimit = true}),
              ratelimit_fields(policy, decision, named));
  }
  EXPECT_THROW(ratelimit_fields(quotas, admitted(0, 1s, 2)), InvalidArgument);
}

TEST(RateLimitFields, AQuoteOrABackslashInANameIsEscaped) {
  const QuotaPolicy quota = quota_policy(R"(say "hi" \ bye)", Limit::gcra("10/s"));
  const std::vector<QuotaPolicy> quotas = {quota};
  EXPECT_EQ(ratelimit_policy_field(quotas), R"("say \"hi\" \\ bye";q=10;w=1)");
  EXPECT_EQ(ratelimit_field(quota, admitted(4, 300ms)), R"("say \"hi\" \\ bye";r=4;t=1)");
}

TEST(RateLimitFields, WholeSecondsRoundUpAndNeverGoBelowZero) {
  EXPECT_EQ(whole_seconds_up(0us), 0);
  EXPECT_EQ(whole_seconds_up(1us), 1);
  EXPECT_EQ(whole_seconds_up(1s), 1);
  EXPECT_EQ(whole_seconds_up(-5s), 0);
}

}  // namespace
}  // namespace redlimit

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

std::string error_of(std::string_view text) {
  try {
    Policy::parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(LimitFactories, NameWhatEachParameterMeans) {
  EXPECT_EQ(Limit::gcra("10/s", 20), (Limit{Algorithm::gcra, {10, 1s}, 20, Window::aligned}));
  EXPECT_EQ(Limit::token_bucket(Rate{5, 1min}, 7), (Limit{Algorithm::token_bucket, {5, 1min}, 7}));
  EXPECT_EQ(Limit::leaky_bucket("400/s", 50), (Limit{Algorithm::leaky_bucket, {400, 1s}, 50}));
  EXPECT_EQ(Limit::fixed_window("1000/day"), (Limit{Algorithm::fixed_window, {1000, 24h}}));
  EXPECT_EQ(Limit::fixed_window("100/min", Window::anchored),
            (Limit{Algorithm::fixed_window, {100, 1min}, 0, Window::anchored}));
  EXPECT_EQ(Limit::sliding_window_log("10/s"), (Limit{Algorithm::sliding_window_log, {10, 1s}}));
  EXPECT_EQ(Limit::sliding_window_counter(Rate{10, 1h}),
            (Limit{Algorithm::sliding_window_counter, {10, 1h}}));
}

TEST(LimitFactories, BadRateTextIsInvalidArgument) {
  EXPECT_THROW(Limit::gcra("10 per second"), InvalidArgument);
  EXPECT_THROW(Limit::fixed_window("0/s"), InvalidArgument);
}

TEST(Policy, IsBuiltFromAListOfLimitsInOrder) {
  const Policy policy{Limit::gcra("10/s"), Limit::fixed_window("1000/day")};
  ASSERT_EQ(policy.limits.size(), 2u);
  EXPECT_EQ(policy.limits[0], Limit::gcra("10/s"));
  EXPECT_EQ(policy.limits[1], Limit::fixed_window("1000/day"));
  EXPECT_EQ(Policy::of(Limit::gcra("1/s")), Policy{Limit::gcra("1/s")});
}

TEST(PolicyText, ParsesTheDocumentedExample) {
  EXPECT_EQ(Policy::parse("gcra 10/s burst 20; fixed_window 1000/day"),
            (Policy{Limit::gcra("10/s", 20), Limit::fixed_window("1000/day")}));
}

TEST(PolicyText, ParsesEveryAlgorithmAndOption) {
  EXPECT_EQ(Policy::parse("token_bucket 5/min burst 7;leaky_bucket 400/s queue 50 ; "
                          "fixed_window 100/min anchored; sliding_window_log 10/s;"
                          "sliding_window_counter 10/h"),
            (Policy{Limit::token_bucket("5/min", 7), Limit::leaky_bucket("400/s", 50),
                    Limit::fixed_window("100/min", Window::anchored),
                    Limit::sliding_window_log("10/s"), Limit::sliding_window_counter("10/h")}));
}

TEST(PolicyText, WritesOnlyWhatDiffersFromTheDefaults) {
  EXPECT_EQ(to_string(Policy{Limit::gcra("10/s", 20), Limit::fixed_window("1000/day")}),
            "gcra 10/1s burst 20; fixed_window 1000/1d");
  EXPECT_EQ(to_string(Policy{Limit::leaky_bucket("5/250ms", 3),
                             Limit::fixed_window("7/3s", Window::anchored)}),
            "leaky_bucket 5/250ms queue 3; fixed_window 7/3s anchored");
}

TEST(PolicyText, RoundTripsEveryRepresentablePolicy) {
  std::mt19937_64 random(13);
  const Algorithm algorithms[] = {
      Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
      Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};
  const std::chrono::microseconds periods[] = {1us, 1500us, 250ms, 1s, 7s, 1min, 90min, 24h, 48h};
  for (int round = 0; round < 2000; ++round) {
    Policy policy;
    const int count = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < count; ++i) {
      Limit limit;
      limit.algorithm = algorithms[random() % 6];
      limit.rate = {1 + static_cast<std::int64_t>(random() % 1'000'000), periods[random() % 9]};
      limit.burst = random() % 3 == 0 ? 0 : static_cast<std::int64_t>(random() % 100'000);
      limit.window = random() % 2 == 0 ? Window::aligned : Window::anchored;
      policy.limits.push_back(limit);
    }
    policy.scope = random() % 2 == 0 ? Scope::overall : Scope::per_client;
    const std::string text = to_string(policy);
    EXPECT_EQ(Policy::parse(text), policy) << text;
  }
}

TEST(PolicyText, BadTextIsInvalidArgumentNamingTheLimitAndWord) {
  EXPECT_NE(error_of("").find("limit 1 is empty"), std::string::npos) << error_of("");
  EXPECT_NE(error_of("gcra").find("limit 1 has no rate"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s; bucket 5/s").find("limit 2 has an unknown algorithm 'bucket'"),
            std::string::npos);
  EXPECT_NE(error_of("gcra 10/s; ; gcra 1/s").find("limit 2 is empty"), std::string::npos);
  EXPECT_NE(error_of("gcra ten/s").find("limit 1 has a bad rate"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s burst").find("no number after 'burst'"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s burst -3").find("'-3' where a decimal integer"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s queue 3").find("takes no 'queue' (use 'burst')"),
            std::string::npos);
  EXPECT_NE(error_of("leaky_bucket 10/s burst 3").find("takes no 'burst' (use 'queue')"),
            std::string::npos);
  EXPECT_NE(error_of("gcra 10/s fast").find("unknown option 'fast'"), std::string::npos);
  EXPECT_EQ(error_of("gcra 10/s;"), "accepted");
}

TEST(PolicyText, AScopeClauseSetsTheScopeAndRoundTrips) {
  const Policy policy = Policy::parse("gcra 10/s; scope per_client");
  EXPECT_EQ(policy.scope, Scope::per_client);
  EXPECT_EQ(policy.limits, Policy::parse("gcra 10/s").limits);
  EXPECT_EQ(to_string(policy), "gcra 10/1s; scope per_client");
  EXPECT_EQ(Policy::parse(to_string(policy)), policy);
  EXPECT_EQ(Policy::parse("scope per_client; gcra 10/s"), policy);
  EXPECT_EQ(Policy::parse("gcra 10/s; scope overall").scope, Scope::overall);
  EXPECT_EQ(to_string(Policy::parse("gcra 10/s; scope overall")), "gcra 10/1s");
}

TEST(PolicyText, ABadScopeClauseIsInvalidArgument) {
  EXPECT_NE(error_of("gcra 10/s; scope everyone").find("bad scope clause"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s; scope").find("bad scope clause"), std::string::npos);
  EXPECT_NE(error_of("gcra 10/s; scope per_client extra").find("bad scope clause"),
            std::string::npos);
}

}  // namespace
}  // namespace redlimit

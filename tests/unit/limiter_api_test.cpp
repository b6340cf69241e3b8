// The Limiter API as a new user writes it: options built inline in a co_await, keys and permit
// counts that cannot be confused.
#include <gtest/gtest.h>

#include <functional>
#include <stop_token>
#include <type_traits>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/both.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using test::both;

using namespace std::chrono_literals;
using LimiterApi = test::LoopTest;

Policy per_second(std::int64_t permits) {
  return Policy::of(Limit{Algorithm::gcra, {permits, 1s}, 0, Window::aligned});
}

// The README's form: the options braced inside the co_await expression, the stop token a named
// std::stop_token. g++ 12 destroys such a braced temporary twice when its type is not trivially
// destructible.
Task<Decision> acquire_with_named_token(Limiter& limiter, std::stop_token token) {
  co_return co_await limiter.acquire("k", 1, {.max_wait = 2s, .stop = token});
}

Task<Decision> acquire_with_token_of(Limiter& limiter, std::stop_source source) {
  co_return co_await limiter.acquire("k", 1, {.max_wait = 2s, .stop = source.get_token()});
}

TEST_F(LimiterApi, OptionsBracedInsideCoAwaitAreSafe) {
  Limiter limiter(loop(), per_second(100), {.name = "braced"});
  for (int i = 0; i < 3; ++i) {
    std::stop_source source;
    EXPECT_TRUE(run(loop(), acquire_with_named_token(limiter, source.get_token())).allowed);
    EXPECT_TRUE(run(loop(), acquire_with_token_of(limiter, source)).allowed);
  }
}

Task<Decision> await_later(Limiter& limiter, std::stop_source source) {
  // The token of `{.stop = source.get_token()}` is a temporary that dies with this statement;
  // the task keeps its own copy.
  auto task = limiter.acquire("k", 1, {.stop = source.get_token()});
  co_return co_await std::move(task);
}

TEST_F(LimiterApi, ATaskMadeWithATemporaryTokenCanBeAwaitedLater) {
  Limiter limiter(loop(), per_second(100), {.name = "later"});
  std::stop_source source;
  EXPECT_TRUE(run(loop(), await_later(limiter, source)).allowed);
}

Task<void> cancel_soon(uv_loop_t* loop, std::stop_source source) {
  co_await sleep_for(loop, 1ms);
  source.request_stop();
}

Task<bool> cancelled_by_braced_token(uv_loop_t* loop, Limiter& limiter) {
  std::stop_source source;
  spawn(loop, cancel_soon(loop, source));
  try {
    co_await limiter.acquire("k", 1, {.max_wait = 10s, .stop = source.get_token()});
  } catch (const Cancelled&) {
    co_return true;
  }
  co_return false;
}

TEST_F(LimiterApi, ATokenGivenInlineStillCancels) {
  Limiter limiter(loop(), per_second(1), {.name = "cancel"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  EXPECT_TRUE(run(loop(), cancelled_by_braced_token(loop(), limiter)));
}

TEST(LimiterApiTypes, WhatUsersBuildInlineIsTriviallyDestructible) {
  static_assert(std::is_trivially_destructible_v<AcquireOptions>);
  static_assert(std::is_trivially_destructible_v<Permits>);
  static_assert(std::is_trivially_destructible_v<FailurePolicy>);
  static_assert(std::is_trivially_destructible_v<Decision>);
  static_assert(std::is_trivially_destructible_v<Limit>);
}

template <class Id>
concept TryAcquireTakes = requires(Limiter& limiter, Id id) {
  limiter.try_acquire(id);
};
template <class Id>
concept AcquireTakes = requires(Limiter& limiter, Id id) {
  limiter.acquire(id);
};
template <class Id>
concept CallbackTakes = requires(Limiter& limiter, Id id,
                                 std::function<void(Result<Decision>)> done) {
  limiter.try_acquire(id, 1, done);
  limiter.acquire(id, 1, {}, done);
};

template <class L>
concept TakesLiteralZero = requires(L& limiter) {
  limiter.try_acquire(0);
}
|| requires(L& limiter) {
  limiter.acquire(0, 1);
};

TEST(LimiterApiTypes, AnIntegerIsNeitherAKeyNorAPermitCount) {
  static_assert(!TryAcquireTakes<int>);
  static_assert(!TryAcquireTakes<std::int64_t>);
  static_assert(!TryAcquireTakes<unsigned>);
  static_assert(!AcquireTakes<int>);
  static_assert(!AcquireTakes<std::int64_t>);
  static_assert(!CallbackTakes<int>);
  static_assert(!CallbackTakes<std::int64_t>);
  // A literal 0 would otherwise be a null `const char*` key.
  static_assert(!TakesLiteralZero<Limiter>);
  static_assert(TryAcquireTakes<std::string>);
  static_assert(TryAcquireTakes<const char*>);
  static_assert(TryAcquireTakes<Permits>);
  static_assert(AcquireTakes<std::string>);
  static_assert(AcquireTakes<Permits>);
  static_assert(CallbackTakes<std::string>);
  static_assert(requires(Limiter & limiter, std::function<void(Result<Decision>)> done) {
    limiter.try_acquire("k", done);
    limiter.acquire("k", done);
    limiter.acquire("k", 2, done);
    limiter.try_acquire(done);
    limiter.acquire(done);
    limiter.acquire(Permits{2}, done);
  });
  static_assert(requires(Limiter & limiter, std::function<void(Result<Decision>)> done) {
    limiter.try_acquire(Permits{2}, done);
    limiter.acquire(Permits{2}, {}, done);
  });
}

TEST(LimiterApiTypes, OptionsNeverKeepATemporaryToken) {
  static_assert(std::is_aggregate_v<AcquireOptions>);
  // `options.stop = source.get_token();` would refer to a token dead at the end of the line.
  static_assert(!std::is_assignable_v<StopTokenRef&, std::stop_token>);
  static_assert(std::is_assignable_v<StopTokenRef&, const std::stop_token&>);
}

TEST_F(LimiterApi, TheSharedKeyTakesPermitsByName) {
  Limiter limiter(loop(), per_second(5), {.name = "shared"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire()).allowed);
  EXPECT_TRUE(run(loop(), limiter.try_acquire(Permits{3})).allowed);
  EXPECT_EQ(run(loop(), limiter.peek("shared")).remaining, 1);
  EXPECT_TRUE(run(loop(), limiter.acquire()).allowed);
  EXPECT_FALSE(run(loop(), limiter.acquire(Permits{1}, {.max_wait = 0us})).allowed);
  EXPECT_TRUE(run(loop(), limiter.try_acquire("user-42", 5)).allowed) << "keys are separate";
}

TEST_F(LimiterApi, CallbacksTakeTheSharedKeyByPermitsToo) {
  Limiter limiter(loop(), per_second(5), {.name = "callbacks"});
  std::vector<std::int64_t> remaining;
  auto record = [&](Result<Decision> r) { remaining.push_back(r.value().remaining); };
  limiter.try_acquire(Permits{2}, record);
  limiter.acquire(Permits{3}, {.max_wait = 0us}, record);
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{3, 0}));
  EXPECT_FALSE(run(loop(), limiter.try_acquire("callbacks")).allowed) << "the name is the key";
}

TEST_F(LimiterApi, ShowsItsPolicyInItsMetricsAsVersionZeroAndEachLimit) {
  auto metrics = std::make_shared<Metrics>();
  Limiter limiter(loop(), Policy{Limit::gcra("10/s", 20), Limit::fixed_window("1000/day")},
                  {.name = "shown", .metrics = metrics});
  LimiterStats stats = metrics->snapshot().limiters.at(0);
  EXPECT_EQ(stats.name, "shown");
  EXPECT_EQ(stats.policy_version, 0);
  EXPECT_EQ(stats.policy_limits,
            (std::vector<Limit>{Limit::gcra("10/s", 20), Limit::fixed_window("1000/day")}));
  limiter.set_policy(Policy{Limit::sliding_window_log("5/min")});
  stats = metrics->snapshot().limiters.at(0);
  EXPECT_EQ(stats.policy_limits, std::vector<Limit>{Limit::sliding_window_log("5/min")});
  EXPECT_NE(
      metrics->prometheus_text().find("redlimit_policy_limit_permits{limiter=\"shown\",limit=\"0\","
                                      "algorithm=\"sliding_window_log\"} 5\n"),
      std::string::npos);
}

TEST_F(LimiterApi, ALimiterIsMovableAndItsPolicyIsACopy) {
  static_assert(std::is_nothrow_move_constructible_v<Limiter>);
  static_assert(std::is_nothrow_move_assignable_v<Limiter>);
  Limiter first(loop(), per_second(1), {.name = "moved"});
  EXPECT_TRUE(run(loop(), first.try_acquire("k")).allowed);
  Limiter second = std::move(first);
  EXPECT_FALSE(run(loop(), second.try_acquire("k")).allowed) << "the state moved with it";
  Policy policy = second.policy();
  second.set_policy(per_second(2));
  EXPECT_EQ(policy.limits.front().rate.permits, 1) << "a copy, not a view of the limiter";
  first = std::move(second);
  EXPECT_EQ(first.policy().limits.front().rate.permits, 2);
}

TEST_F(LimiterApi, ASharedPolicyIsThePolicyInForceAndChangesOnlyByBeingReplaced) {
  Limiter limiter(loop(), per_second(1), {.name = "shared"});
  const std::shared_ptr<const Policy> first = limiter.shared_policy();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first, limiter.policy());
  EXPECT_EQ(limiter.shared_policy(), first) << "the same object while the policy stays";
  limiter.set_policy(per_second(2));
  const std::shared_ptr<const Policy> second = limiter.shared_policy();
  EXPECT_NE(second, first);
  EXPECT_EQ(second->limits.front().rate.permits, 2);
  EXPECT_EQ(first->limits.front().rate.permits, 1) << "the one held stays as it was";
}

Task<void> wait_for_permit(Limiter& limiter, Decision* decision) {
  *decision = co_await limiter.acquire("k", 1);
}

Task<void> replace_after(uv_loop_t* loop, Limiter& limiter, std::chrono::milliseconds delay) {
  co_await sleep_for(loop, delay);
  limiter = Limiter(loop, per_second(1), {.name = "others"});
}

TEST_F(LimiterApi, ALimiterAssignedToWhileACallWaitsLetsTheCallFinish) {
  Limiter limiter(loop(), per_second(5), {.name = "replaced"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 5)).allowed);
  Decision waited;
  run(loop(), both(wait_for_permit(limiter, &waited), replace_after(loop(), limiter, 20ms)));
  EXPECT_TRUE(waited.allowed) << "the waiting call kept the state it reserved in";
  EXPECT_GE(waited.waited, 150ms);
}

TEST(FailurePolicyKind, IsAnEnumClassWithTheFamiliarNames) {
  static_assert(std::is_enum_v<FailurePolicy::Kind>);
  static_assert(!std::is_convertible_v<FailurePolicy::Kind, int>);
  constexpr FailurePolicy policy{.kind = FailurePolicy::fail_open};
  static_assert(policy.kind == FailurePolicy::Kind::fail_open);
}

}  // namespace
}  // namespace redlimit

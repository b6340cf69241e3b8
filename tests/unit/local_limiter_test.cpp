#include <gtest/gtest.h>

#include "limiter/local_backend.hpp"
#include "limiter/policy_enforcer.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "support/loop_test.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using LocalLimiterTest = test::LoopTest;

Policy per_second(std::int64_t permits, Algorithm algorithm = Algorithm::gcra) {
  return Policy::of(Limit{algorithm, {permits, 1s}, 0, Window::aligned});
}

TEST_F(LocalLimiterTest, DecidesInProcessWithTheSameAlgorithms) {
  Limiter limiter(loop(), per_second(3), {.name = "local"});
  for (int i = 0; i < 3; ++i) {
    const Decision d = run(loop(), limiter.try_acquire("user-1"));
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.source, Source::local);
    EXPECT_EQ(d.remaining, 2 - i);
    EXPECT_EQ(d.server_time_us, 0);
  }
  const Decision denied = run(loop(), limiter.try_acquire("user-1"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_GT(denied.retry_after, 0us);
  EXPECT_LE(denied.retry_after, 333'334us);
  EXPECT_TRUE(run(loop(), limiter.try_acquire("user-2")).allowed) << "keys are independent";
}

TEST_F(LocalLimiterTest, TheNameIsTheKeyOfOneSharedResource) {
  Limiter limiter(loop(), per_second(1), {.name = "provider"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire()).allowed);
  EXPECT_FALSE(run(loop(), limiter.try_acquire("provider")).allowed);
}

TEST_F(LocalLimiterTest, PeekAndResetDoWhatTheySay) {
  Limiter limiter(loop(), per_second(2), {.name = "x"});
  EXPECT_TRUE(run(loop(), limiter.peek("k")).allowed);
  EXPECT_EQ(run(loop(), limiter.peek("k")).remaining, 2);  // available now; peek takes none
  run(loop(), limiter.try_acquire("k", 2));
  EXPECT_FALSE(run(loop(), limiter.peek("k")).allowed);
  run(loop(), limiter.reset("k"));
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 2)).allowed);
}

TEST_F(LocalLimiterTest, BadInputIsAnInvalidArgumentNamingTheField) {
  Limiter limiter(loop(), per_second(5), {.name = "x"});
  EXPECT_THROW(run(loop(), limiter.try_acquire("")), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", 0)), InvalidArgument);
  EXPECT_THROW(run(loop(), limiter.try_acquire("k", 6)), InvalidArgument);
  EXPECT_THROW(Limiter(loop(), Policy{}, {.name = "x"}), InvalidArgument);
  EXPECT_THROW(Limiter(loop(), per_second(5), {.name = ""}), InvalidArgument);
  EXPECT_THROW(Limiter(loop(), per_second(5), {.name = "x", .prefix = "rl{"}), InvalidArgument);
}

TEST_F(LocalLimiterTest, SetPolicyAppliesFromTheNextCallWithoutFreeingPermits) {
  Limiter limiter(loop(), per_second(10), {.name = "x"});
  run(loop(), limiter.try_acquire("k", 10));
  limiter.set_policy(per_second(100));
  EXPECT_EQ(limiter.policy().limits[0].rate.permits, 100);
  // The same backlog in time (1 s) is a full bucket under the new rate too: nothing is freed.
  EXPECT_FALSE(run(loop(), limiter.try_acquire("k")).allowed);
}

TEST(LocalBackend, EvictsIdleKeysSoMemoryStaysBounded) {
  std::int64_t now = 1'800'000'000'000'000;
  detail::LocalBackend backend([&now] { return now; });
  const auto policy = detail::CompiledPolicy::compile(per_second(1000));
  std::size_t most = 0;
  for (int i = 0; i < 100'000; ++i) {
    backend.decide_now(
        {policy, detail::KeyBase("key-" + std::to_string(i)), detail::Operation::acquire, 1});
    most = std::max(most, backend.size());
    // 100,000 distinct keys in 100 ms, each state mattering for 1 ms: Redis keeps each key
    // through the millisecond after its write's (PX 1), 1 to 2 ms.
    now += 1;
  }
  EXPECT_LE(most, 2'000u) << "keys Redis would have dropped are evicted";
  EXPECT_GE(most, 1'999u);
  now += 2'000;
  backend.decide_now({policy, detail::KeyBase("one-more"), detail::Operation::acquire, 1});
  EXPECT_EQ(backend.size(), 1u);
}

// Issue 33, bug 4: a key is kept as long as Redis keeps it, not only while its state matters.
// The scripts write the TTL in whole milliseconds, rounded up, at least 1, and Redis expires a
// key once its millisecond clock is past the write's millisecond plus that TTL.
TEST_F(LocalLimiterTest, AKeyIsKeptAsLongAsRedisKeepsIt) {
  const std::int64_t t = 1'800'000'000'000'200;  // 200 us into a millisecond
  std::int64_t now = t;
  detail::LocalBackend backend([&now] { return now; });
  // Whether the key is still held at `at` (a peek of another key evicts what expired by then,
  // and stores nothing).
  const auto held_at = [&](std::int64_t at) {
    now = at;
    backend.decide_now({detail::CompiledPolicy::compile(per_second(1)), detail::KeyBase("probe"),
                        detail::Operation::peek, 1});
    return backend.size() == 1;
  };
  struct Case {
    const char* what;
    Policy policy;
    bool refunded;
    std::int64_t gone_at;
  };
  for (const auto& [what, policy, refunded, gone_at] :
       {Case{"1 permit of 1000/s: 1 ms, PX 1", per_second(1000), false, t + 1'800},
        Case{"1 permit of 3/s: 333,333.3 us, PX 334", per_second(3), false, t + 334'800},
        Case{"refunded, exactly full: PX 1", per_second(10), true, t + 1'800}}) {
    SCOPED_TRACE(what);
    now = t;
    const auto compiled = detail::CompiledPolicy::compile(policy);
    const detail::DecideRequest request(compiled, detail::KeyBase("k"), detail::Operation::acquire,
                                        1);
    ASSERT_TRUE(backend.decide_now(request).allowed);
    if (refunded) {
      ASSERT_TRUE(run(loop(), backend.adjust(request, detail::Adjustment::refund, 1, 0)).applied);
    }
    EXPECT_TRUE(held_at(gone_at - 1)) << "Redis still holds the key";
    EXPECT_FALSE(held_at(gone_at)) << "Redis no longer holds the key";
  }
}

TEST(LocalBackend, ADeniedOrPeekedNewKeyStoresNothing) {
  std::int64_t now = 1'800'000'000'000'000;
  detail::LocalBackend backend([&now] { return now; });
  const auto policy = detail::CompiledPolicy::compile(per_second(1));
  backend.decide_now({policy, detail::KeyBase("peeked"), detail::Operation::peek, 1});
  EXPECT_EQ(backend.size(), 0u);
}

}  // namespace
}  // namespace redlimit

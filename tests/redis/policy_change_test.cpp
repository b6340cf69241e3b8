// Changing a bucket policy (gcra, leaky_bucket, token_bucket) with set_policy(): the bugs of
// issue 14 and the carries, each against Redis and in process (the same rules in both).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "policy/stale_policy.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/decision_text.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A limiter on a private redis-server (parameter true) or in process (false).
class PolicyChange : public test::LoopTest, public ::testing::WithParamInterface<bool> {
 protected:
  void TearDown() override {
    limiter_.reset();
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  Limiter& limiter(Limit limit) {
    limiter_ = GetParam() ? std::make_unique<Limiter>(client_, Policy::of(limit),
                                                      LimiterOptions{.name = "change"})
                          : std::make_unique<Limiter>(loop(), Policy::of(limit),
                                                      LimiterOptions{.name = "change"});
    return *limiter_;
  }
  /// How many of `tries` single permits pass on key "k" now.
  int admitted(int tries) {
    int count = 0;
    for (int i = 0; i < tries; ++i)
      count += run(loop(), limiter_->try_acquire("k")).allowed ? 1 : 0;
    return count;
  }

  /// The backend the limiters use, driven directly (injected times and policy epochs).
  detail::Backend& backend() {
    if (GetParam()) return redis_backend_;
    return local_backend_;
  }
  /// The decision on `permits` of `policy` at `now_us` on key "{same}".
  Decision decide(const std::shared_ptr<const detail::CompiledPolicy>& policy, std::int64_t now_us,
                  std::int64_t permits = 1) {
    return run(loop(), backend().decide(detail::DecideRequest(policy, detail::KeyBase("{same}"),
                                                              detail::Operation::acquire, permits,
                                                              now_us)));
  }

  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};

 private:
  std::unique_ptr<Limiter> limiter_;
  detail::RedisBackend redis_backend_{client_.dispatcher()};
  detail::LocalBackend local_backend_;
};

std::string where(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "Redis" : "InProcess";
}

INSTANTIATE_TEST_SUITE_P(Backends, PolicyChange, ::testing::Bool(), where);

// Bug 2: the stored time kept its length in time, so a bucket exhausted at 100/min looked
// almost empty at 100/h (98 of 100 passed).
TEST_P(PolicyChange, TighteningGcraKeepsTheBacklogInPermits) {
  Limiter& l = limiter(Limit::gcra("100/min"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 100)).allowed);
  l.set_policy(Policy{Limit::gcra("100/h")});
  EXPECT_LE(admitted(100), 1) << "an exhausted bucket stays exhausted (a permit may have refilled)";
}

TEST_P(PolicyChange, TighteningALeakyBucketKeepsItsQueueInPermits) {
  Limiter& l = limiter(Limit::leaky_bucket("100/min"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k")).allowed);  // leaves now, the next leaves in 600 ms
  l.set_policy(Policy{Limit::leaky_bucket("100/h")});
  EXPECT_EQ(admitted(1), 0);  // a denial carries the key over (and its expiry with it)
  run(loop(), sleep_for(loop(), 700ms));
  EXPECT_EQ(admitted(1), 0) << "one permit queued is 36 s at the new rate, not 600 ms";
}

Task<void> acquire_into(Limiter& limiter, std::vector<Decision>& out) {
  out.push_back(co_await limiter.acquire("k", 1, {.max_wait = 3s}));
}

Task<void> set_policy_after(uv_loop_t* loop, Limiter& limiter, Policy policy) {
  co_await sleep_for(loop, 100ms);
  limiter.set_policy(std::move(policy));
}

// Issue 32, bug 4: waiters kept the slots they reserved under the old policy.
TEST_P(PolicyChange, WaitersReserveAgainWhenSetPolicyTightens) {
  Limiter& l = limiter(Limit::gcra("20/s", 1));
  std::vector<Decision> decisions;
  auto all = [](uv_loop_t* loop, Limiter& target, std::vector<Decision>& out) -> Task<void> {
    TaskGroup group;
    for (int i = 0; i < 10; ++i)
      group.add(acquire_into(target, out));
    group.add(set_policy_after(loop, target, Policy{Limit::gcra("10/s", 1)}));
    co_await group.join();
  };
  run(loop(), all(loop(), l, decisions));
  ASSERT_EQ(decisions.size(), 10u);
  std::chrono::microseconds longest{};
  for (const Decision& decision : decisions) {
    EXPECT_TRUE(decision.allowed);
    longest = std::max(longest, decision.waited);
  }
  // At 20/s the last of ten leaves 450 ms in; two or three leave before the change at 100 ms,
  // the rest at 10/s after it: the last at least 100 + 6 x 100 ms in.
  EXPECT_GE(longest, 700ms) << "the waiters kept the old policy's slots";
}

// Issue 32, bug 5: a change of scope starts every key afresh (the other scope's keys are other
// keys): only a reset says so.
TEST_P(PolicyChange, SetPolicyRefusesAScopeChangeUnlessItIsAReset) {
  Limiter& l = limiter(Limit::gcra("10/h"));
  Policy per_client = Policy::parse("gcra 10/h; scope per_client");
  EXPECT_THROW(l.set_policy(per_client), InvalidArgument);
  EXPECT_EQ(l.policy(), Policy::parse("gcra 10/h"));
  l.set_policy(per_client, Carry::reset);
  EXPECT_EQ(l.policy(), per_client);
}

// Bug 1: denials never refreshed the key's TTL, set by the last admission under the old
// policy: the key expired about a second later and the whole limit came back.
TEST_P(PolicyChange, TighteningATokenBucketOutlivesTheOldTtl) {
  Limiter& l = limiter(Limit::token_bucket("10/s"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 10)).allowed);
  l.set_policy(Policy{Limit::token_bucket("10/h")});
  EXPECT_EQ(admitted(1), 0);
  run(loop(), sleep_for(loop(), 2200ms));
  EXPECT_LE(admitted(10), 1) << "the empty bucket refills at 10/h, not by expiring";
}

// Bug 4: a refund after set_policy() was refilled at the old rate: cancelled 500 ms after the
// change, the debt had shrunk by 500 permits at 1000/s, and those came back too.
TEST_P(PolicyChange, ARefundAfterTighteningIsCountedUnderTheNewPolicy) {
  Limiter& l = limiter(Limit::token_bucket("1000/s"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 1000)).allowed);
  std::chrono::steady_clock::duration before_change{};
  {
    test::StartedTask waiting =
        test::start([](Limiter& lim) -> Task<void> { co_await lim.acquire("k", 1000); }(l));
    run(loop(), sleep_for(loop(), 20ms));  // reserved: the bucket owes 1000 permits
    before_change = std::chrono::steady_clock::now() - start;
    l.set_policy(Policy{Limit::token_bucket("1000/h")});
    run(loop(), sleep_for(loop(), 480ms));
    EXPECT_FALSE(waiting.done());
  }
  run(loop(), sleep_for(loop(), 50ms));  // the spawned give-back runs
  // What refilled at 1000/s before the change (1 per ms), and a little at 1000/h since.
  const auto refilled = std::chrono::duration_cast<std::chrono::milliseconds>(before_change);
  EXPECT_LE(admitted(1000), refilled.count() + 2)
      << "the refund comes back in the new policy's terms; the old rate ended at the change";
}

// The carries (Bucket4j's TokensInheritanceStrategy): 95 of 100/min taken leaves 5 permits;
// at 10/min they stay 5 (as_is), become 0 (proportional) or the bucket starts full (reset). A
// leaky bucket carried as is keeps its queue instead: the 95 permits queued stay queued (a
// queue beyond the new size drains first), and none is left.
TEST_P(PolicyChange, EachCarrySaysWhatTheAvailablePermitsBecome) {
  const std::pair<Carry, std::int64_t> expected[] = {
      {Carry::as_is, 5}, {Carry::proportional, 0}, {Carry::reset, 10}};
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    for (const auto& [carry, remaining] : expected) {
      SCOPED_TRACE(std::string(to_string(algorithm)) + " carry " +
                   std::to_string(static_cast<int>(carry)));
      Limiter& l = limiter(Limit{algorithm, Rate::parse("100/min"), 0, Window::aligned});
      run(loop(), l.reset("k"));
      EXPECT_TRUE(run(loop(), l.try_acquire("k", 95)).allowed);
      l.set_policy(Policy{Limit{algorithm, Rate::parse("10/min"), 0, Window::aligned}}, carry);
      const Decision now = run(loop(), l.peek("k"));
      const std::int64_t left =
          algorithm == Algorithm::leaky_bucket && carry == Carry::as_is ? 0 : remaining;
      // A permit at the old rate may have come back between the two calls (600 ms each).
      EXPECT_GE(now.remaining, left);
      EXPECT_LE(now.remaining, carry == Carry::as_is ? left + 1 : left);
    }
  }
}

TEST_P(PolicyChange, LooseningAsIsKeepsThePermitsAvailableAndNoMore) {
  Limiter& l = limiter(Limit::gcra("10/min"));
  EXPECT_TRUE(run(loop(), l.try_acquire("k", 5)).allowed);
  l.set_policy(Policy{Limit::gcra("100/min")});
  const int passed = admitted(100);
  EXPECT_GE(passed, 5);
  EXPECT_LE(passed, 6) << "the 5 left, and at most one refilled at 100/min meanwhile";
}

/// Decides one permit of `policy` on `backend` at `now_us`; the stale version it was refused
/// with, or 0.
Task<std::int64_t> refused_version(detail::Backend& backend,
                                   std::shared_ptr<const detail::CompiledPolicy> policy,
                                   std::int64_t now_us) {
  try {
    const detail::DecideRequest request(std::move(policy), detail::KeyBase("{stale}"),
                                        detail::Operation::acquire, 1, now_us);
    co_await backend.decide(request);
  } catch (const detail::StalePolicy& stale) {
    co_return stale.stored_version();
  }
  co_return 0;
}

// A key written under a stored policy's version 5 refuses version 3 before any write; version
// 0 (a policy given in process) and newer versions are served.
TEST_P(PolicyChange, AKeyWrittenUnderANewerVersionRefusesAnOlderOne) {
  std::unique_ptr<detail::Backend> backend;
  if (GetParam()) {
    backend = std::make_unique<detail::RedisBackend>(client_.dispatcher());
  } else {
    backend = std::make_unique<detail::LocalBackend>();
  }
  const std::int64_t now = 1'800'000'000'000'000;
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const Policy policy{Limit{algorithm, Rate::parse("10/s"), 0, Window::aligned}};
    const auto at = [&](std::int64_t version) {
      return detail::CompiledPolicy::compile(policy, {.version = version});
    };
    run(loop(), backend->reset(at(0), "{stale}"));
    EXPECT_EQ(run(loop(), refused_version(*backend, at(5), now)), 0);
    EXPECT_EQ(run(loop(), refused_version(*backend, at(3), now + 1)), 5);
    EXPECT_EQ(run(loop(), refused_version(*backend, at(0), now + 2)), 0);
    EXPECT_EQ(run(loop(), refused_version(*backend, at(6), now + 3)), 0);
    EXPECT_EQ(run(loop(), refused_version(*backend, at(5), now + 4)), 6);
  }
  run(loop(),
      backend->reset(detail::CompiledPolicy::compile(Policy{Limit::gcra("1/s")}), "{stale}"));
}

/// The decision on one permit of `policy` on `backend` at `now_us`, on key "{same}".
Task<Decision> decide_once(detail::Backend& backend,
                           std::shared_ptr<const detail::CompiledPolicy> policy,
                           std::int64_t now_us) {
  const detail::DecideRequest request(std::move(policy), detail::KeyBase("{same}"),
                                      detail::Operation::acquire, 1, now_us);
  co_return co_await backend.decide(request);
}

// A new version of the same parameters (the store bumped it for another reason) keeps a key's
// state exactly, fraction of a permit included: only other parameters, or a reset, convert.
TEST_P(PolicyChange, ANewVersionOfTheSameParametersKeepsTheStateExactly) {
  std::unique_ptr<detail::Backend> backend;
  if (GetParam()) {
    backend = std::make_unique<detail::RedisBackend>(client_.dispatcher());
  } else {
    backend = std::make_unique<detail::LocalBackend>();
  }
  const std::int64_t now = 1'800'000'000'000'000;
  const Policy policy{Limit::gcra("10/s")};
  const auto at = [&](std::int64_t version) {
    return detail::CompiledPolicy::compile(policy, {.version = version, .since_us = now});
  };
  EXPECT_TRUE(run(loop(), decide_once(*backend, at(1), now)).allowed);  // idle at now + 100 ms
  // Half a permit has come back by now + 50 ms; it stays: idle at now + 200 ms after this one.
  const Decision second = run(loop(), decide_once(*backend, at(2), now + 50'000));
  EXPECT_TRUE(second.allowed);
  EXPECT_EQ(second.reset_after, 150'000us);
  run(loop(), backend->reset(at(2), "{same}"));
}

/// A leaky bucket of `rate` and `queue`, compiled under `epoch`.
std::shared_ptr<const detail::CompiledPolicy> leaky(std::string_view rate, std::int64_t queue,
                                                    detail::PolicyEpoch epoch = {}) {
  return detail::CompiledPolicy::compile(Policy{Limit::leaky_bucket(rate, queue)}, epoch);
}

constexpr std::int64_t t0 = 1'800'000'000'000'000;

// 1/min with a queue of 60, one permit admitted at t0: the next departure is at t0 + 60 s. The
// queue shrunk to 5 at t0 + 60 ms: the next permit still leaves at t0 + 60 s, not at once.
TEST_P(PolicyChange, ShrinkingALeakyBucketsQueueKeepsItsNextDeparture) {
  EXPECT_TRUE(decide(leaky("1/min", 60), t0).allowed);
  const auto shrunk = leaky("1/min", 5, {.since_us = t0 + 60'000, .carry = Carry::as_is});
  const Decision early = decide(shrunk, t0 + 60'000);
  EXPECT_FALSE(early.allowed);
  EXPECT_EQ(early.retry_after, 59'940'000us) << "the next departure is still at t0 + 60 s";
  EXPECT_FALSE(decide(shrunk, t0 + 59'999'999).allowed);
  EXPECT_TRUE(decide(shrunk, t0 + 60'000'000).allowed);
}

// 10/s with a queue of 10, one permit admitted at t0 (the next leaves at t0 + 100 ms); the queue
// grown to 100 at t0 + 1 ms: the key still waits 99 ms, not the 9 s of a queue of 91 permits.
TEST_P(PolicyChange, GrowingALeakyBucketsQueueKeepsItsNextDeparture) {
  EXPECT_TRUE(decide(leaky("10/s", 10), t0).allowed);
  const auto grown = leaky("10/s", 100, {.since_us = t0 + 1'000, .carry = Carry::as_is});
  const Decision early = decide(grown, t0 + 1'000);
  EXPECT_FALSE(early.allowed);
  EXPECT_EQ(early.retry_after, 99'000us) << "the next departure is still at t0 + 100 ms";
  EXPECT_TRUE(decide(grown, t0 + 100'000).allowed);
}

// The permits queued at since stay queued, and depart at the new rate: at 1/s, two admitted
// (t0, t0 + 1 s) and two reserved at t0 + 1 s leave the next departure at t0 + 4 s, 3 permits
// queued at t0 + 1 s. At 1 per 2 s (a queue of 10) from then: 3 x 2 s, the next at t0 + 7 s.
TEST_P(PolicyChange, ALeakyBucketsQueueDepartsAtTheNewRateFromTheChange) {
  EXPECT_TRUE(decide(leaky("1/s", 5), t0).allowed);
  EXPECT_TRUE(decide(leaky("1/s", 5), t0 + 1'000'000).allowed);
  const detail::DecideRequest two(leaky("1/s", 5), detail::KeyBase("{same}"),
                                  detail::Operation::acquire, 2, t0 + 1'000'000);
  ASSERT_TRUE(run(loop(), backend().reserve(two, 3'600'000'000)).decision.allowed);
  const auto slower = leaky("1/2s", 10, {.since_us = t0 + 1'000'000, .carry = Carry::as_is});
  EXPECT_EQ(decide(slower, t0 + 1'000'000).retry_after, 6'000'000us);
}

// A queue longer than the new size is kept: it drains before anything else is admitted (a
// tightening never frees a permit). At 1/s, 10 permits queued at t0 (the next departs at
// t0 + 10 s, one admitted and 9 reserved); the queue shrunk to 2 at t0 + 1 s.
TEST_P(PolicyChange, ALeakyBucketsQueueBeyondItsNewSizeDrainsFirst) {
  EXPECT_TRUE(decide(leaky("1/s", 10), t0).allowed);
  const detail::DecideRequest nine(leaky("1/s", 10), detail::KeyBase("{same}"),
                                   detail::Operation::acquire, 9, t0);
  ASSERT_TRUE(run(loop(), backend().reserve(nine, 3'600'000'000)).decision.allowed);
  const auto shrunk = leaky("1/s", 2, {.since_us = t0 + 1'000'000, .carry = Carry::as_is});
  const Decision denied = decide(shrunk, t0 + 1'000'000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after, 9'000'000us);
  EXPECT_EQ(denied.remaining, 0);
}

// A process that has not heard of a change yet decides under the old version after its since
// (here 1.3 ms after, the propagation measured in docs/algorithms.md). The new version converts
// the key at since all the same: the old rate's refill after since is not carried over. 100,000/s
// with a burst of 1,000, exhausted just before since, then 10/h: nothing is left to admit.
TEST_P(PolicyChange, ALateOldVersionWriteIsNotCreditedToTheNewPolicy) {
  const std::int64_t since = t0;
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const auto old_version = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("100000/s"), 1'000, Window::aligned}}, {.version = 1});
    const auto new_version = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("10/h"), 1'000, Window::aligned}},
        {.version = 2, .since_us = since, .carry = Carry::as_is});
    run(loop(), backend().reset(old_version, "{same}"));
    EXPECT_TRUE(decide(old_version, since - 1, 1'000).allowed);
    decide(old_version, since + 1'300);  // the late write: the old rate refilled 130 permits
    int admitted = 0;
    for (int i = 0; i < 1'000; ++i)
      admitted += decide(new_version, since + 2'000 + i).allowed ? 1 : 0;
    EXPECT_EQ(admitted, 0) << "the key was exhausted at since";
  }
}

// Issue 32, bug 6: set_policy() of the same policy with Carry::reset reset nothing (the key's
// stamp, its parameters and version 0, did not change). It makes an exhausted key full again,
// once: the permits taken after the reset stay taken.
TEST_P(PolicyChange, SetPolicyOfTheSamePolicyWithResetMakesAnExhaustedKeyFullOnce) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const Policy policy{Limit{algorithm, Rate::parse("10/h"), 0, Window::aligned}};
    Limiter& l = limiter(policy.limits.front());
    run(loop(), l.reset("k"));
    EXPECT_TRUE(run(loop(), l.try_acquire("k", 10)).allowed);
    EXPECT_FALSE(run(loop(), l.try_acquire("k", 10)).allowed);
    l.set_policy(policy, Carry::reset);
    EXPECT_TRUE(run(loop(), l.try_acquire("k", 10)).allowed) << "the reset made the key full";
    EXPECT_FALSE(run(loop(), l.try_acquire("k")).allowed) << "the reset applied again";
    EXPECT_FALSE(run(loop(), l.try_acquire("k")).allowed) << "the reset applied again";
  }
}

// Issue 33, bug 4: a refund leaves the key exactly full at t: its state matters no longer, but
// the script writes its TTL in whole milliseconds (at least 1) and Redis keeps the key through
// the millisecond that TTL ends in, until t + 1.8 ms here. set_policy() was called 50 ms before
// t (the refund was in flight, decided under the old policy), so within that millisecond the
// key is converted at since, where it held the refunded permit's backlog. The in-process
// backend dropped the key at once, and answered as for a fresh key: 20 permits, reset 0 (a
// leaky bucket carried as is keeps its empty queue, as a fresh key has).
TEST_P(PolicyChange, AKeyJustFullIsConvertedWhileRedisKeepsIt) {
  const std::int64_t t = t0 + 200;  // 200 us into a millisecond
  struct Expected {
    Algorithm algorithm;
    Carry carry;
    bool allowed;
    std::int64_t remaining;
    std::int64_t reset_us;  ///< at t + 1 ms
  };
  for (const auto& [algorithm, carry, allowed, remaining, reset_us] :
       {Expected{Algorithm::gcra, Carry::as_is, true, 10, 499'000},
        Expected{Algorithm::gcra, Carry::proportional, true, 19, 49'000},
        Expected{Algorithm::token_bucket, Carry::as_is, true, 10, 499'000},
        Expected{Algorithm::token_bucket, Carry::proportional, true, 19, 49'000},
        Expected{Algorithm::leaky_bucket, Carry::as_is, true, 20, 0},
        Expected{Algorithm::leaky_bucket, Carry::proportional, false, 19, 49'000}}) {
    SCOPED_TRACE(std::string(to_string(algorithm)) + " carry " +
                 std::to_string(static_cast<int>(carry)));
    const auto before = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("10/s"), 10, Window::aligned}});
    const auto after = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("20/s"), 20, Window::aligned}},
        {.version = 0, .since_us = t - 50'000, .carry = carry});
    run(loop(), backend().reset(before, "{same}"));
    ASSERT_TRUE(decide(before, t).allowed);
    const detail::DecideRequest refund(before, detail::KeyBase("{same}"),
                                       detail::Operation::acquire, 1, t);
    ASSERT_TRUE(run(loop(), backend().adjust(refund, detail::Adjustment::refund, 1, 0)).applied);
    // Within the millisecond after the key became full, and at its last microsecond.
    for (const std::int64_t later : {1'000, 1'799}) {
      const Decision peeked = run(
          loop(), backend().decide(detail::DecideRequest(after, detail::KeyBase("{same}"),
                                                         detail::Operation::peek, 1, t + later)));
      SCOPED_TRACE("at t + " + std::to_string(later) + " us: " + test::describe(peeked));
      EXPECT_EQ(peeked.allowed, allowed);
      EXPECT_EQ(peeked.remaining, remaining);
      EXPECT_EQ(peeked.reset_after.count(), reset_us == 0 ? 0 : reset_us - (later - 1'000));
    }
  }
  run(loop(),
      backend().reset(detail::CompiledPolicy::compile(Policy{Limit::gcra("1/s")}), "{same}"));
}

/// The epoch of set_policy(policy, Carry::reset) called at `since_us` on a limiter that follows
/// no store.
detail::PolicyEpoch reset_at(std::int64_t since_us) {
  return {.version = 0, .since_us = since_us, .carry = Carry::reset};
}

// Another process of the same name, with the same fixed policy and no reset (as_is, version 0),
// decides on the key between two decisions of the resetting limiter: the reset is not applied
// again (that would free permits at every such decision). 10/h with a burst of 10, exhausted at
// t0; the reset at t0 + 2 us makes the key full, the limiter takes 1, the other process 1 (a
// leaky bucket's queue denies it): neither the rest of the burst, 9, nor a permit more is left.
TEST_P(PolicyChange, AnotherProcessOfTheSameNameDoesNotMakeTheResetApplyAgain) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const Policy policy{Limit{algorithm, Rate::parse("10/h"), 10, Window::aligned}};
    const auto fixed = detail::CompiledPolicy::compile(policy);
    const auto resetting = detail::CompiledPolicy::compile(policy, reset_at(t0 + 2));
    run(loop(), backend().reset(fixed, "{same}"));
    EXPECT_TRUE(decide(fixed, t0, 10).allowed);
    EXPECT_FALSE(decide(fixed, t0 + 1).allowed);
    EXPECT_TRUE(decide(resetting, t0 + 3).allowed) << "the reset made the key full";
    EXPECT_EQ(decide(fixed, t0 + 4).allowed, algorithm != Algorithm::leaky_bucket);
    EXPECT_FALSE(decide(resetting, t0 + 5, 9).allowed)
        << "the other process's decision made the reset apply again";
    EXPECT_FALSE(decide(resetting, t0 + 6, 9).allowed) << "the reset applied again";
  }
}

// set_policy()'s since is the client's system clock; a Redis clock behind it decides at a now
// before since (the conversion is at now then). The reset applies once, not at every call until
// Redis's clock passes since.
TEST_P(PolicyChange, AResetWhoseSinceIsAheadOfTheDecisionsClockAppliesOnce) {
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const Policy policy{Limit{algorithm, Rate::parse("10/h"), 10, Window::aligned}};
    const auto fixed = detail::CompiledPolicy::compile(policy);
    const auto resetting = detail::CompiledPolicy::compile(policy, reset_at(t0 + 10'000'000));
    run(loop(), backend().reset(fixed, "{same}"));
    EXPECT_TRUE(decide(fixed, t0, 10).allowed);
    EXPECT_TRUE(decide(resetting, t0 + 1, 10).allowed) << "the reset made the key full";
    EXPECT_FALSE(decide(resetting, t0 + 2).allowed) << "the reset applied again";
    EXPECT_FALSE(decide(resetting, t0 + 3).allowed) << "the reset applied again";
  }
}

/// Reserves `n` permits of `policy` on key "{shift}" at `now_us` (waiting up to an hour).
Task<detail::Reservation> reserve_at(detail::Backend& backend,
                                     std::shared_ptr<const detail::CompiledPolicy> policy,
                                     std::int64_t n, std::int64_t now_us) {
  co_return co_await backend.reserve(
      detail::DecideRequest(std::move(policy), detail::KeyBase("{shift}"),
                            detail::Operation::acquire, n, now_us),
      3'600'000'000);
}

/// Cancels `reservation` (of `n` permits) under `policy` at `now_us`.
Task<detail::CancelVerdict> cancel_at(detail::Backend& backend,
                                      std::shared_ptr<const detail::CompiledPolicy> policy,
                                      std::int64_t n, detail::Reservation reservation,
                                      std::int64_t now_us) {
  const detail::CancelTicket ticket{.slot = reservation.slot,
                                    .den = reservation.den,
                                    .d = reservation.d,
                                    .version = reservation.book.version,
                                    .epoch = reservation.book.epoch,
                                    .cancels_before = reservation.book.cancels};
  const detail::DecideRequest cancel(std::move(policy), detail::KeyBase("{shift}"),
                                     detail::Operation::acquire, n, now_us);
  const detail::ReservationReply reply =
      co_await backend.run_reservation(detail::ReservationOperation::cancel, cancel, ticket);
  co_return reply.verdict;
}

// A cancel after a loosening (1/min -> 1000/s) gives the key back its permit at the new rate,
// 1 ms: the waiters behind must be told to move by no more than that, not by the reservation's
// own minute (they would fire ahead of the converted schedule). Checked on the cancellation log
// (what every later cancel and the script's verdicts go by) and on the notice.
TEST_P(PolicyChange, ACancelAfterLooseningMovesTheWaitersBehindByTheStepInForceAtMost) {
  std::unique_ptr<detail::Backend> backend;
  if (GetParam()) {
    backend = std::make_unique<detail::RedisBackend>(client_.dispatcher());
  } else {
    backend = std::make_unique<detail::LocalBackend>();
  }
  const std::int64_t now = 1'800'000'000'000'000;
  for (const Algorithm algorithm :
       {Algorithm::gcra, Algorithm::token_bucket, Algorithm::leaky_bucket}) {
    SCOPED_TRACE(to_string(algorithm));
    const auto slow = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("2/min"), 4, Window::aligned}});
    const auto fast = detail::CompiledPolicy::compile(
        Policy{Limit{algorithm, Rate::parse("1000/s"), 0, Window::aligned}},
        {.version = 0, .since_us = now + 10, .carry = Carry::as_is});
    run(loop(), backend->reset(slow, "{shift}"));
    // The burst (a leaky bucket's queue of 4 takes 1: the 3 reserved below wait behind it).
    const std::int64_t taken = algorithm == Algorithm::leaky_bucket ? 1 : 4;
    EXPECT_TRUE(run(loop(), reserve_at(*backend, slow, taken, now)).decision.allowed);
    const detail::Reservation first = run(loop(), reserve_at(*backend, slow, 2, now + 1));
    const detail::Reservation second = run(loop(), reserve_at(*backend, slow, 1, now + 2));
    ASSERT_TRUE(first.decision.allowed && second.decision.allowed);
    ASSERT_GT(first.wait_us, 0);
    // In process, the notice is delivered inline; Redis publishes the same shift as it logs.
    std::vector<detail::CancelNotice> notices;
    const std::uint64_t watch = backend->watch(
        detail::DecideRequest(slow, detail::KeyBase("{shift}"), detail::Operation::acquire, 1),
        [&notices](const detail::CancelNotice& notice) { notices.push_back(notice); }, {});
    EXPECT_EQ(run(loop(), cancel_at(*backend, fast, 2, first, now + 20)),
              detail::CancelVerdict::returned);
    // Two permits at 1000/s: 2 ms, exactly.
    const auto at_most_two_ms = [](detail::FracTime shift) {
      return shift.us < 2000 || (shift.us == 2000 && shift.frac == 0);
    };
    if (GetParam()) {
      const std::string key = "{shift}" + slow->limits().front().key_suffix + ":cancels";
      const Reply log = run(loop(), client_.command("ZRANGE", key, "0", "-1"));
      ASSERT_EQ(log.as_array().size(), 1u);
      // "number:cancelled_version:shift_us:shift_f:p:backlog_end_us"
      std::istringstream entry(log.as_array()[0].as_string());
      std::int64_t number = 0, cancelled = 0, us = 0, frac = 0;
      char colon = 0;
      entry >> number >> colon >> cancelled >> colon >> us >> colon >> frac;
      EXPECT_TRUE(at_most_two_ms({us, frac})) << log.as_array()[0].as_string();
    } else {
      ASSERT_EQ(notices.size(), 1u);
      EXPECT_TRUE(at_most_two_ms(notices[0].shift))
          << notices[0].shift.us << " us + " << notices[0].shift.frac << "/" << notices[0].den;
    }
    backend->unwatch(watch);
    run(loop(), backend->reset(slow, "{shift}"));
  }
}

// A value the previous release wrote (no stamp) is read as before and rewritten with one.
TEST_P(PolicyChange, AnOldFormatValueIsReadAsBeforeAndStampedOnTheNextDecision) {
  if (!GetParam()) GTEST_SKIP() << "only Redis holds values of the previous release";
  // Why a burst of 5: a TAT 5 s ahead is then within now + tau (a later one would be a clock
  // step back, and taken as now + tau).
  Limiter& l = limiter(Limit::gcra("1/s", 5));
  const std::int64_t in_five_seconds = std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::system_clock::now().time_since_epoch() + 5s)
                                           .count();
  const std::string key = "rl:{change:k}:gcra:0";
  run(loop(), client_.command("SET", key, std::to_string(in_five_seconds), "PX", "10000"));
  EXPECT_FALSE(run(loop(), l.try_acquire("k")).allowed) << "the old TAT still holds";
  const std::string value = run(loop(), client_.command("GET", key)).as_string();
  const std::string stamped = std::to_string(in_five_seconds) + ":0:1:0:0:0:1000000:5:0:";
  ASSERT_EQ(value.substr(0, stamped.size()), stamped) << value;
  const std::int64_t written_at = std::stoll(value.substr(stamped.size()));
  EXPECT_LE(written_at, in_five_seconds - 4'000'000) << "the write time, the script's now";
  EXPECT_GE(written_at, in_five_seconds - 5'000'000);
}

}  // namespace
}  // namespace redlimit

// The in-process semaphore: Semaphore(uv_loop_t*, ...) on a LocalBackend, and the LeaseTable
// that models lua/semaphore.lua's rules with an injected clock.
#include <gtest/gtest.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <type_traits>

#include "limiter/semaphore_leases.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/semaphore.hpp"
#include "redlimit/task_group.hpp"
#include "support/both.hpp"
#include "support/loop_test.hpp"
#include "support/semaphore_tasks.hpp"

namespace redlimit {
namespace {

using test::acquire_tenant;
using test::both;
using test::hold;
using Outcome = test::AcquireOutcome;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using LocalSemaphoreTest = test::LoopTest;

SemaphoreOptions named(std::string name, std::chrono::milliseconds lease_ttl = 10s) {
  return SemaphoreOptions{.name = std::move(name), .lease_ttl = lease_ttl};
}

TEST_F(LocalSemaphoreTest, AtMostNPermitsAreHeldAtOnce) {
  Semaphore semaphore(loop(), 3, named("exports"));
  test::TakeAllOutcome outcome;
  run(loop(), test::take_three_then_release(semaphore, &outcome));
  EXPECT_EQ(outcome.granted, 3);
  EXPECT_EQ(outcome.sources, std::vector<Source>(3, Source::local));
  EXPECT_TRUE(outcome.full_refused);
  EXPECT_TRUE(outcome.free_again);
}

TEST_F(LocalSemaphoreTest, ASemaphoreIsMovableAndItsLeasesStayWithTheState) {
  static_assert(std::is_nothrow_move_constructible_v<Semaphore>);
  static_assert(std::is_nothrow_move_assignable_v<Semaphore>);
  Semaphore first(loop(), 1, named("moved"));
  std::optional<Lease> lease;
  run(loop(), hold(first, &lease));
  ASSERT_TRUE(lease && lease->held());
  Semaphore second = std::move(first);
  std::optional<Lease> refused;
  run(loop(), hold(second, &refused));
  EXPECT_FALSE(refused) << "the held permit moved with the state";
  run(loop(), lease->release());
  first = std::move(second);
  run(loop(), hold(first, &refused));
  EXPECT_TRUE(refused) << "the release reached the moved state";
}

TEST_F(LocalSemaphoreTest, PastMaxWaitAcquireAnswersWithALeaseNotHeldThatSaysWhenToRetry) {
  Semaphore semaphore(loop(), 1, named("exports", 20s));
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  Outcome outcome;
  AcquireOptions short_wait;
  short_wait.max_wait = 50ms;
  run(loop(), acquire_tenant(semaphore, short_wait, &outcome));
  EXPECT_EQ(outcome.what, "not held");
  EXPECT_EQ(outcome.source, Source::local);
  EXPECT_GT(outcome.retry_after, 19s) << "the holder's lease expires in about 20 s";
  EXPECT_LE(outcome.retry_after, 20s);
  run(loop(), holder->release());
}

Task<void> release_after(uv_loop_t* loop, std::optional<Lease>* lease,
                         std::chrono::milliseconds delay) {
  co_await sleep_for(loop, delay);
  co_await (*lease)->release();
}

TEST_F(LocalSemaphoreTest, AcquireWakesOnAReleaseLongBeforeTheTtl) {
  Semaphore semaphore(loop(), 1, named("exports", 20s));
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  Outcome outcome;
  run(loop(), both(acquire_tenant(semaphore, {}, &outcome), release_after(loop(), &holder, 50ms)));
  EXPECT_EQ(outcome.what, "granted");
  // Why half the TTL, not the release's 50 ms plus a slack: on a busy machine the wake can be
  // late by more than any slack; what tells a release's wake from the TTL's is the 20 s.
  EXPECT_LT(outcome.waited, 10s) << "woken by the release, not at the lease's TTL";
}

TEST_F(LocalSemaphoreTest, AcquireGetsThePermitOfALeaseThatExpires) {
  Semaphore semaphore(loop(), 1, named("exports", 100ms));
  std::optional<Lease> abandoned;
  // Why from before the hold: the lease's 100 ms count from its grant, and a busy machine may
  // start the waiter a while after it.
  const auto before_hold = std::chrono::steady_clock::now();
  run(loop(), hold(semaphore, &abandoned));
  Outcome outcome;
  run(loop(), acquire_tenant(semaphore, {}, &outcome));
  EXPECT_EQ(outcome.what, "granted");
  EXPECT_GE(std::chrono::steady_clock::now() - before_hold, 99ms);
}

Task<void> stop_after(uv_loop_t* loop, std::stop_source* source) {
  co_await sleep_for(loop, 30ms);
  source->request_stop();
}

TEST_F(LocalSemaphoreTest, AStopRequestWhileWaitingThrowsCancelled) {
  Semaphore semaphore(loop(), 1, named("exports", 20s));
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  std::stop_source stop;
  const std::stop_token token = stop.get_token();  // AcquireOptions refers to it
  AcquireOptions stoppable;
  stoppable.stop = token;
  Outcome outcome;
  run(loop(), both(acquire_tenant(semaphore, stoppable, &outcome), stop_after(loop(), &stop)));
  EXPECT_EQ(outcome.what, "cancelled");
  run(loop(), holder->release());
}

TEST_F(LocalSemaphoreTest, DestroyingALeaseReleasesItAtOnce) {
  Semaphore semaphore(loop(), 1, named("exports", 20s));
  {
    std::optional<Lease> lease;
    run(loop(), hold(semaphore, &lease));
    EXPECT_TRUE(lease.has_value());
  }
  std::optional<Lease> again;
  run(loop(), hold(semaphore, &again));
  EXPECT_TRUE(again.has_value());
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument";
}

TEST_F(LocalSemaphoreTest, NamesPrefixesAndKeysAreCheckedAsTheLimitersAre) {
  EXPECT_THROW(Semaphore(loop(), 0, named("x")), InvalidArgument);
  EXPECT_THROW(Semaphore(loop(), 2, named("")), InvalidArgument);
  EXPECT_THROW(Semaphore(loop(), 2, named("x", 0ms)), InvalidArgument);
  const std::string semaphore_says =
      message_of([this] { Semaphore(loop(), 2, SemaphoreOptions{.name = "x", .prefix = "a b"}); });
  const std::string limiter_says = message_of([this] {
    Limiter(loop(), Policy::of(Limit{Algorithm::gcra, {1, 1s}, 0, Window::aligned}),
            LimiterOptions{.name = "x", .prefix = "a b"});
  });
  EXPECT_EQ(semaphore_says.substr(semaphore_says.find("::")),
            limiter_says.substr(limiter_says.find("::")));
  EXPECT_THROW(
      Semaphore(loop(), 2, SemaphoreOptions{.name = "x", .on_failure = {.local_share = 0}}),
      InvalidArgument);
  Semaphore semaphore(loop(), 2, named("x"));
  EXPECT_THROW(run(loop(), semaphore.try_acquire("k", 3)), InvalidArgument);
  EXPECT_THROW(run(loop(), semaphore.try_acquire("k", 0)), InvalidArgument);
  EXPECT_THROW(run(loop(), semaphore.try_acquire("", 1)), InvalidArgument);
  AcquireOptions negative;
  negative.max_wait = -1us;
  EXPECT_THROW(run(loop(), semaphore.acquire("k", 1, negative)), InvalidArgument);
}

// ---- LeaseTable: the script's rules, with an injected clock (microseconds).

detail::LeaseRequest lease(std::string id, std::int64_t permits, std::int64_t capacity = 3,
                           std::int64_t ttl_us = 1000) {
  return detail::LeaseRequest("k", std::move(id), capacity, permits, ttl_us);
}

TEST(LeaseTable, ARefusalSaysWhenEnoughLeasesExpire) {
  detail::LeaseTable table;
  EXPECT_TRUE(table.grant(lease("a", 1, 3, 1000), 0).granted);   // expires at 1000
  EXPECT_TRUE(table.grant(lease("b", 2, 3, 500), 100).granted);  // expires at 600
  const detail::LeaseReply one = table.grant(lease("c", 1), 200);
  EXPECT_FALSE(one.granted);
  EXPECT_EQ(one.expires_or_free_at_us, 600) << "b's permits free one";
  const detail::LeaseReply three = table.grant(lease("c", 3), 200);
  EXPECT_EQ(three.expires_or_free_at_us, 1000) << "all three must expire";
  EXPECT_EQ(table.held("k", 200), 3);
}

TEST(LeaseTable, ExpiredLeasesFreeTheirPermitsAndTheKeyIsForgotten) {
  detail::LeaseTable table;
  EXPECT_TRUE(table.grant(lease("a", 3), 0).granted);
  EXPECT_FALSE(table.grant(lease("b", 1), 999).granted);
  EXPECT_TRUE(table.grant(lease("b", 1), 1000).granted) << "a expired at 1000";
  EXPECT_EQ(table.held("k", 1000), 1);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.grant(lease("c", 1, 3, 1), 5000).granted);
  EXPECT_TRUE(table.release(lease("c", 1), 5000).granted);
  table.grant(lease("d", 1, 3, 1), 10'000);  // evicts what expired, then holds d
  table.grant(lease("e", 1, 3, 1), 20'000);
  EXPECT_EQ(table.size(), 1u) << "only e's key is left";
}

TEST(LeaseTable, RetryingAGrantOfTheSameLeaseIsIdempotent) {
  detail::LeaseTable table;
  const detail::LeaseReply first = table.grant(lease("a", 2), 0);
  const detail::LeaseReply retried = table.grant(lease("a", 2), 10);
  EXPECT_TRUE(retried.granted);
  EXPECT_EQ(retried.expires_or_free_at_us, first.expires_or_free_at_us);
  EXPECT_EQ(table.held("k", 10), 2);
}

TEST(LeaseTable, RenewExtendsALiveLeaseOnly) {
  detail::LeaseTable table;
  table.grant(lease("a", 1), 0);
  const detail::LeaseReply renewed = table.renew(lease("a", 1), 500);
  EXPECT_TRUE(renewed.granted);
  EXPECT_EQ(renewed.expires_or_free_at_us, 1500);
  EXPECT_EQ(table.held("k", 1400), 1);
  EXPECT_FALSE(table.renew(lease("a", 1), 1500).granted) << "expired";
  EXPECT_FALSE(table.renew(lease("unknown", 1), 0).granted);
}

TEST(LeaseTable, ReleasesNeverAddPermits) {
  detail::LeaseTable table;
  table.grant(lease("a", 2), 0);
  EXPECT_TRUE(table.release(lease("a", 2), 10).granted);
  EXPECT_FALSE(table.release(lease("a", 2), 20).granted) << "a second release";
  table.grant(lease("b", 1), 30);
  EXPECT_FALSE(table.release(lease("a", 2), 40).granted);
  EXPECT_EQ(table.held("k", 40), 1) << "b still holds its permit";
  table.grant(lease("c", 1), 50);
  EXPECT_FALSE(table.release(lease("c", 1), 1050).granted) << "c had expired";
}

}  // namespace
}  // namespace redlimit

#include "redlimit/semaphore.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stop_token>

#include "limiter/local_backend.hpp"
#include "limiter/redis_backend.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/both.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"
#include "support/semaphore_tasks.hpp"

namespace redlimit {
namespace {

using test::acquire_tenant;
using test::both;
using test::hold;
using Outcome = test::AcquireOutcome;

using namespace std::chrono_literals;
using test::deadline_slack;
using Clock = std::chrono::steady_clock;

class SemaphoreTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    EXPECT_TRUE(server_.keys_without_ttl().empty()) << "a key without TTL was left";
    LoopTest::TearDown();
  }
  long long held(const std::string& key) {
    return server_.integer({"ZCOUNT", "rl:{exports:" + key + "}:semaphore", "(0", "+inf"});
  }

  test::RedisServer server_;
  Client client_{
      loop(), ClientOptions{.url = server_.url(), .command_timeout = 2s, .reservation_lease = 6s}};
};

TEST_F(SemaphoreTest, AtMostNPermitsAreHeldAtOnce) {
  Semaphore semaphore(client_, 3, "exports", 10s);
  test::TakeAllOutcome outcome;
  run(loop(), test::take_three_then_release(semaphore, &outcome));
  EXPECT_EQ(outcome.granted, 3);
  EXPECT_EQ(outcome.sources, std::vector<Source>(3, Source::redis));
  EXPECT_TRUE(outcome.full_refused);
  EXPECT_TRUE(outcome.free_again);
  EXPECT_EQ(held("tenant"), 0);
}

Task<void> hold_one(Semaphore& semaphore, std::vector<std::string>* keys_while_held,
                    test::RedisServer& server) {
  auto lease = co_await semaphore.try_acquire("tenant");
  *keys_while_held = server.keys();
  co_await lease->release();
}

TEST_F(SemaphoreTest, KeysStartWithTheChosenPrefix) {
  Semaphore semaphore(client_, 2, SemaphoreOptions{.name = "exports", .prefix = "app"});
  std::vector<std::string> keys;
  run(loop(), hold_one(semaphore, &keys, server_));
  EXPECT_EQ(keys, std::vector<std::string>{"app:{exports:tenant}:semaphore"});
}

Task<void> releases_never_add(Semaphore& semaphore, test::RedisServer& server, long long* held) {
  auto lease = co_await semaphore.try_acquire("tenant", 2);
  co_await lease->release();
  co_await lease->release();  // double release
  auto other = co_await semaphore.try_acquire("tenant", 1);
  co_await lease->release();  // after another lease took a permit
  *held = server.integer({"ZCOUNT", "rl:{exports:tenant}:semaphore", "(0", "+inf"});
  co_await other->release();
}

TEST_F(SemaphoreTest, ReleasingTwiceOrTooLateIsHarmlessAndNeverAddsPermits) {
  Semaphore semaphore(client_, 2, "exports", 10s);
  long long count = -1;
  run(loop(), releases_never_add(semaphore, server_, &count));
  EXPECT_EQ(count, 1) << "the other lease still holds its permit";
}

Task<void> renew_then_expire(uv_loop_t* loop, Semaphore& semaphore, bool* renewed_later,
                             bool* expired_refused, bool* permit_back) {
  auto lease = co_await semaphore.try_acquire("tenant");
  const std::int64_t first_expiry = lease->expires_at_us();
  co_await sleep_for(loop, 50ms);
  co_await lease->renew();
  *renewed_later = lease->expires_at_us() > first_expiry;
  co_await sleep_for(loop, 350ms);  // past the 300 ms TTL
  try {
    co_await lease->renew();
  } catch (const LeaseExpired&) {
    *expired_refused = true;
  }
  *permit_back = (co_await semaphore.try_acquire("tenant")).has_value();
}

TEST_F(SemaphoreTest, RenewExtendsALeaseAndAnExpiredOneCannotBeRenewed) {
  Semaphore semaphore(client_, 1, "exports", 300ms);
  bool renewed_later = false;
  bool expired_refused = false;
  bool permit_back = false;
  run(loop(), renew_then_expire(loop(), semaphore, &renewed_later, &expired_refused, &permit_back));
  EXPECT_TRUE(renewed_later);
  EXPECT_TRUE(expired_refused);
  EXPECT_TRUE(permit_back) << "an expired lease's permit is free";
}

Task<void> hold_then_release(uv_loop_t* loop, Semaphore& semaphore,
                             std::chrono::milliseconds hold) {
  auto lease = co_await semaphore.try_acquire("tenant");
  co_await sleep_for(loop, hold);
  co_await lease->release();
}

Task<void> wait_for_permit(Semaphore& semaphore, Clock::duration* waited) {
  const auto start = Clock::now();
  Lease lease = co_await semaphore.acquire("tenant");
  *waited = Clock::now() - start;
  co_await lease.release();
}

TEST_F(SemaphoreTest, AcquireWakesOnAReleaseLongBeforeTheTtl) {
  Semaphore semaphore(client_, 1, "exports", 20s);
  Clock::duration waited{};
  run(loop(),
      both(hold_then_release(loop(), semaphore, 100ms), wait_for_permit(semaphore, &waited)));
  EXPECT_GE(waited, 95ms);
  // Why not closer to 100 ms: a busy machine delays the notice; without it, the waiter would
  // ask again only after its fallback poll (1 s and more) or the lease's 20 s.
  EXPECT_LT(waited, 900ms) << "woken by the release notice";
}

/// Releases `lease` `after` its waiter began, then lets `user` subscribe to the semaphore's
/// channels: the notice of that release was published while nobody heard it.
Task<void> release_unheard_then_allow(uv_loop_t* loop, Lease lease, std::chrono::milliseconds after,
                                      test::RedisServer& server, std::string user) {
  co_await sleep_for(loop, after);
  co_await lease.release();
  server.command({"ACL", "SETUSER", user, "&rl:*"});
}

TEST_F(SemaphoreTest, AWaiterHearsOfAReleaseMadeBeforeItsSubscriptionWasConfirmed) {
  // The waiter's user may not subscribe at first: its subscriber is refused and backs off (50
  // ms, doubling). The release comes while it is refused; then it is allowed. Its subscription,
  // confirmed at the next attempt, may have missed a release: the waiter asks again then, rather
  // than at its fallback poll (1 s and more after its refusal) or at the lease's 20 s.
  server_.command(
      {"ACL", "SETUSER", "waiter", "reset", "on", ">pw", "~rl:*", "resetchannels", "+@all"});
  Client waiter(
      loop(), ClientOptions{.url = "redis://waiter:pw@127.0.0.1:" + std::to_string(server_.port()),
                            .command_timeout = 2s});
  Semaphore holding(client_, 1, "exports", 20s);
  Semaphore waiting(waiter, 1, "exports", 20s);
  std::optional<Lease> held;
  run(loop(), hold(holding, &held));
  ASSERT_TRUE(held && *held);
  Clock::duration waited{};
  run(loop(), both(release_unheard_then_allow(loop(), std::move(*held), 150ms, server_, "waiter"),
                   wait_for_permit(waiting, &waited)));
  run(loop(), waiter.close());
  EXPECT_GE(waited, 145ms);
  EXPECT_LT(waited, 1s) << "asked again once subscribed, not at the fallback poll";
}

TEST_F(SemaphoreTest, AcquireGetsThePermitOfALeaseThatExpires) {
  Semaphore semaphore(client_, 1, "exports", 200ms);
  std::optional<Lease> abandoned;
  // Why from before the hold: the lease's 200 ms count from its grant, and a busy machine may
  // start the waiter a while after it.
  const auto before_hold = Clock::now();
  run(loop(), hold(semaphore, &abandoned));
  Clock::duration waited{};
  run(loop(), wait_for_permit(semaphore, &waited));
  EXPECT_GE(Clock::now() - before_hold, 195ms);
  EXPECT_LT(waited, 200ms + deadline_slack);
}

Task<void> stop_after(uv_loop_t* loop, std::stop_source* source) {
  co_await sleep_for(loop, 60ms);
  source->request_stop();
}

Task<void> replace_after(uv_loop_t* loop, Semaphore& semaphore, std::chrono::milliseconds delay,
                         Client& client) {
  co_await sleep_for(loop, delay);
  semaphore = Semaphore(client, 1, "others", 20s);
}

TEST_F(SemaphoreTest, ASemaphoreAssignedToWhileACallWaitsLetsTheCallFinish) {
  Semaphore holder_side(client_, 1, "exports", 20s);
  std::optional<Lease> holder;
  run(loop(), hold(holder_side, &holder));
  Semaphore waiter_side(client_, 1, "exports", 20s);
  Outcome outcome;
  AcquireOptions short_wait;
  short_wait.max_wait = 150ms;
  run(loop(), both(acquire_tenant(waiter_side, short_wait, &outcome),
                   replace_after(loop(), waiter_side, 30ms, client_)));
  EXPECT_EQ(outcome.what, "not held") << "the waiting call ran to its max_wait";
  run(loop(), holder->release());
}

TEST_F(SemaphoreTest, PastMaxWaitAcquireAnswersWithALeaseNotHeldThatSaysWhenToRetry) {
  Semaphore semaphore(client_, 1, "exports", 20s);
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  Outcome outcome;
  AcquireOptions short_wait;
  short_wait.max_wait = 80ms;
  const auto start = Clock::now();
  run(loop(), acquire_tenant(semaphore, short_wait, &outcome));
  EXPECT_EQ(outcome.what, "not held");
  EXPECT_EQ(outcome.source, Source::redis);
  EXPECT_GT(outcome.retry_after, 19s) << "the holder's lease expires in about 20 s";
  EXPECT_LE(outcome.retry_after, 20s);
  EXPECT_LT(Clock::now() - start, 80ms + deadline_slack);
  EXPECT_EQ(held("tenant"), 1) << "a lease not held takes nothing";
  run(loop(), holder->release());
}

TEST_F(SemaphoreTest, AStopRequestWhileWaitingThrowsCancelled) {
  Semaphore semaphore(client_, 1, "exports", 20s);
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  Outcome outcome;
  std::stop_source stop;
  const std::stop_token token = stop.get_token();  // AcquireOptions refers to it
  AcquireOptions stoppable;
  stoppable.stop = token;
  const auto start = Clock::now();
  run(loop(), both(acquire_tenant(semaphore, stoppable, &outcome), stop_after(loop(), &stop)));
  EXPECT_EQ(outcome.what, "cancelled");
  EXPECT_LT(Clock::now() - start, 60ms + deadline_slack);
  run(loop(), holder->release());
}

Task<void> stop_and_release_while_granting(uv_loop_t* loop, std::stop_source* stop,
                                           std::optional<Lease>* holder) {
  co_await sleep_for(loop, 50ms);  // the waiter's grant is held back by the pause
  stop->request_stop();
  co_await (*holder)->release();  // runs right after that grant, which it refuses
}

// Found in review (not named by an issue): a release heard while a grant was in flight sent the
// next grant at once, without looking at the stop request. Here the subscription's
// confirmation (which counts as a release heard) comes while the grant waits out a pause of
// writes, the stop is requested meanwhile, and the permit is free for the grant after it.
TEST_F(SemaphoreTest, AStopRequestedWhileAGrantIsInFlightIsHeardBeforeAskingAgain) {
  Semaphore semaphore(client_, 1, "exports", 20s);
  std::optional<Lease> holder;
  run(loop(), hold(semaphore, &holder));
  Outcome outcome;
  std::stop_source stop;
  const std::stop_token token = stop.get_token();  // AcquireOptions refers to it
  AcquireOptions stoppable;
  stoppable.stop = token;
  server_.command({"CLIENT", "PAUSE", "300", "WRITE"});
  run(loop(), both(acquire_tenant(semaphore, stoppable, &outcome),
                   stop_and_release_while_granting(loop(), &stop, &holder)));
  EXPECT_EQ(outcome.what, "cancelled");
  EXPECT_EQ(held("tenant"), 0) << "the stopped call took the permit released meanwhile";
}

TEST_F(SemaphoreTest, DestroyingALeaseReleasesIt) {
  Semaphore semaphore(client_, 1, "exports", 20s);
  {
    std::optional<Lease> lease;
    run(loop(), hold(semaphore, &lease));
    EXPECT_EQ(held("tenant"), 1);
  }
  run(loop(), sleep_for(loop(), 20ms));
  EXPECT_EQ(held("tenant"), 0);
}

TEST_F(SemaphoreTest, BadArgumentsAreRejectedBeforeAnyIo) {
  EXPECT_THROW(Semaphore(client_, 0, "x"), InvalidArgument);
  EXPECT_THROW(Semaphore(client_, 2, ""), InvalidArgument);
  EXPECT_THROW(Semaphore(client_, 2, "x", 0ms), InvalidArgument);
  EXPECT_THROW(Semaphore(client_, 2, SemaphoreOptions{.name = "x", .prefix = "a b"}),
               InvalidArgument);
  EXPECT_THROW(Semaphore(client_, 2, SemaphoreOptions{.name = "x", .prefix = ""}), InvalidArgument);
  Semaphore semaphore(client_, 2, "x");
  EXPECT_THROW(run(loop(), semaphore.try_acquire("k", 3)), InvalidArgument);
  EXPECT_THROW(run(loop(), semaphore.try_acquire("", 1)), InvalidArgument);
}

// ---- leases up to the documented capacity of 100,000 permits

/// What a lease of many permits of "tenant" came to: the permits held after each step, and
/// whether every permit carries the lease's expiry after a renew.
struct LargeLeaseOutcome {
  bool granted = false;
  long long held_after_grant = -1;
  long long at_renewed_expiry = -1;
  bool full_refused = false;
  long long held_after_release = -1;
};

Task<void> take_renew_release(Semaphore& semaphore, std::int64_t permits, test::RedisServer& server,
                              LargeLeaseOutcome* outcome) {
  const std::string key = "rl:{exports:tenant}:semaphore";
  std::optional<Lease> lease = co_await semaphore.try_acquire("tenant", permits);
  outcome->granted = lease.has_value();
  if (!lease) co_return;
  outcome->held_after_grant = server.integer({"ZCOUNT", key, "(0", "+inf"});
  co_await lease->renew();
  const std::string expiry = std::to_string(lease->expires_at_us());
  outcome->at_renewed_expiry = server.integer({"ZCOUNT", key, expiry, expiry});
  outcome->full_refused = !(co_await semaphore.try_acquire("tenant", 100'001 - permits));
  co_await lease->release();
  outcome->held_after_release = server.integer({"ZCOUNT", key, "(0", "+inf"});
}

TEST_F(SemaphoreTest, LeasesOfUpToTheWholeCapacityAreTakenRenewedAndReleased) {
  Semaphore semaphore(client_, 100'000, "exports", 20s);
  for (const std::int64_t permits : {4'000, 50'000, 100'000}) {
    LargeLeaseOutcome outcome;
    run(loop(), take_renew_release(semaphore, permits, server_, &outcome));
    ASSERT_TRUE(outcome.granted) << permits << " permits";
    EXPECT_EQ(outcome.held_after_grant, permits);
    EXPECT_EQ(outcome.at_renewed_expiry, permits) << "renew moves every permit's expiry";
    EXPECT_TRUE(outcome.full_refused) << "one permit more than is left is refused";
    EXPECT_EQ(outcome.held_after_release, 0) << permits << " permits";
  }
}

// ---- the script and the in-process model are one algorithm

struct Step {
  detail::LeaseOperation op;
  detail::LeaseRequest request;
};

Task<detail::LeaseReply> ask(detail::Backend& backend, Step step) {
  co_return co_await backend.run_lease(step.op, std::move(step.request));
}

TEST_F(SemaphoreTest, AGrantThatArrivesAfterItsReleaseGrantsNothingForItsTimeToLive) {
  // A release sent after a grant timed out may reach Redis first (it goes on the connection
  // made again); the grant, arriving then, must not hold a permit nobody will release.
  detail::RedisBackend redis(client_.dispatcher());
  detail::LocalBackend local;
  const std::int64_t t0 = 1'700'000'000'000'000;
  const std::int64_t ttl = 20'000'000;
  const auto step = [&](detail::LeaseOperation op, std::int64_t now) {
    return Step{op, detail::LeaseRequest("rl:{late:k}:semaphore", "late", 1, 1, ttl, now)};
  };
  for (detail::Backend* backend :
       {static_cast<detail::Backend*>(&redis), static_cast<detail::Backend*>(&local)}) {
    const std::string where = backend == &redis ? "in Redis" : "in process";
    EXPECT_FALSE(run(loop(), ask(*backend, step(detail::LeaseOperation::release, t0))).granted);
    const detail::LeaseReply late =
        run(loop(), ask(*backend, step(detail::LeaseOperation::grant, t0 + 1000)));
    EXPECT_FALSE(late.granted) << where;
    EXPECT_EQ(late.expires_or_free_at_us, t0 + ttl) << where;
    const detail::LeaseReply after =
        run(loop(), ask(*backend, step(detail::LeaseOperation::grant, t0 + ttl)));
    EXPECT_TRUE(after.granted) << where << ": void only for the lease's time to live";
  }
  server_.command({"DEL", "rl:{late:k}:semaphore", "rl:{late:k}:semaphore:voided"});
}

TEST_F(SemaphoreTest, TheScriptAndTheInProcessModelAnswerAlike) {
  detail::RedisBackend redis(client_.dispatcher());
  detail::LocalBackend local;
  std::mt19937_64 random(13);
  std::int64_t now = 1'700'000'000'000'000;
  int granted = 0;
  int refused = 0;
  for (int i = 0; i < 1500; ++i) {
    now += std::uniform_int_distribution<std::int64_t>(0, 200)(random);
    const int lease = std::uniform_int_distribution<int>(0, 7)(random);
    const Step step{
        static_cast<detail::LeaseOperation>(std::uniform_int_distribution<int>(0, 2)(random)),
        detail::LeaseRequest("rl:{diff:k}:semaphore", "lease" + std::to_string(lease), 4,
                             1 + lease % 3,
                             std::uniform_int_distribution<std::int64_t>(1, 3000)(random), now)};
    const detail::LeaseReply in_redis = run(loop(), ask(redis, step));
    const detail::LeaseReply in_process = run(loop(), ask(local, step));
    ASSERT_EQ(in_redis.granted, in_process.granted)
        << "step " << i << " op " << static_cast<int>(step.op);
    ASSERT_EQ(in_redis.now_us, in_process.now_us) << "step " << i;
    if (step.op != detail::LeaseOperation::release) {
      ASSERT_EQ(in_redis.expires_or_free_at_us, in_process.expires_or_free_at_us)
          << "step " << i << " op " << static_cast<int>(step.op);
    }
    if (step.op == detail::LeaseOperation::grant) ++(in_redis.granted ? granted : refused);
  }
  EXPECT_GT(granted, 100);
  EXPECT_GT(refused, 100) << "the sequence must also fill the semaphore";
  server_.command({"DEL", "rl:{diff:k}:semaphore"});
}

// ---- when Redis cannot answer: SemaphoreOptions::on_failure, as for the Limiter

class SemaphoreFailureTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Semaphore semaphore(std::int64_t permits, FailurePolicy policy) {
    return Semaphore(client_, permits,
                     SemaphoreOptions{.name = "exports", .lease_ttl = 20s, .on_failure = policy});
  }

  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url(), .command_timeout = 100ms}};
};

/// Grants once from Redis, kills it, then asks `attempts` times.
Task<void> ask_while_down(Semaphore& semaphore, test::RedisServer& server, int attempts,
                          std::vector<std::optional<Lease>>* leases) {
  std::optional<Lease> first = co_await semaphore.try_acquire("tenant");
  EXPECT_EQ(first->source(), Source::redis);
  co_await first->release();
  server.kill();
  for (int i = 0; i < attempts; ++i)
    leases->push_back(co_await semaphore.try_acquire("tenant"));
}

TEST_F(SemaphoreFailureTest, FailClosedRefusesAndAcquireAnswersWithALeaseNotHeld) {
  Semaphore refusing = semaphore(2, FailurePolicy{.kind = FailurePolicy::fail_closed});
  std::vector<std::optional<Lease>> leases;
  run(loop(), ask_while_down(refusing, server_, 2, &leases));
  EXPECT_FALSE(leases[0].has_value());
  EXPECT_FALSE(leases[1].has_value());
  Outcome outcome;
  AcquireOptions short_wait;
  short_wait.max_wait = 150ms;
  run(loop(), acquire_tenant(refusing, short_wait, &outcome));
  EXPECT_EQ(outcome.what, "not held");
  EXPECT_EQ(outcome.source, Source::fail_closed);
  EXPECT_GE(outcome.retry_after, 1ms);
}

TEST_F(SemaphoreFailureTest, FailOpenGrantsLeasesThatEnforceNothing) {
  Semaphore open = semaphore(1, FailurePolicy{.kind = FailurePolicy::fail_open});
  std::vector<std::optional<Lease>> leases;
  run(loop(), ask_while_down(open, server_, 3, &leases));
  for (const auto& lease : leases) {
    ASSERT_TRUE(lease.has_value());
    EXPECT_TRUE(lease->held());
    EXPECT_EQ(lease->source(), Source::fail_open);
  }
}

TEST_F(SemaphoreFailureTest, ALeaseDroppedWhileRedisIsDownIsLeftToExpireWithoutReportingAnError) {
  std::vector<std::string> reported;
  // Why restored by a destructor: an ASSERT that returns early must not leave the process's
  // handler pointing at this test's vector.
  struct RestoredAtEnd {
    ErrorHandler previous;
    ~RestoredAtEnd() { set_error_handler(std::move(previous)); }
  } const restored{set_error_handler([&reported](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      reported.emplace_back(e.what());
    }
  })};
  Semaphore refusing = semaphore(1, FailurePolicy{.kind = FailurePolicy::fail_closed});
  {
    std::optional<Lease> lease;
    run(loop(), hold(refusing, &lease));
    ASSERT_TRUE(lease.has_value() && lease->held());
    server_.kill();
  }  // its release runs in the client's background work, which close() waits for
  run(loop(), client_.close());
  EXPECT_TRUE(reported.empty()) << "reported: " << reported.front();
}

/// The permits "tenant" holds once none is held, or after `limit` (whatever it holds then).
Task<void> held_once_free(uv_loop_t* loop, test::RedisServer& server,
                          std::chrono::milliseconds limit, long long* held) {
  const auto give_up_at = Clock::now() + limit;
  for (;;) {
    *held = server.integer({"ZCOUNT", "rl:{exports:tenant}:semaphore", "(0", "+inf"});
    if (*held == 0 || Clock::now() >= give_up_at) co_return;
    co_await sleep_for(loop, 20ms);
  }
}

// Found in review (not named by an issue): a release that could not reach Redis was not tried
// again, so the permit came back only at the lease's expiry.
TEST_F(SemaphoreFailureTest, ALeaseDroppedWhileRedisRestartsIsReleasedOnceRedisAnswersAgain) {
  Semaphore refusing = semaphore(1, FailurePolicy{.kind = FailurePolicy::fail_closed});
  {
    std::optional<Lease> lease;
    run(loop(), hold(refusing, &lease));
    ASSERT_TRUE(lease.has_value() && lease->held());
    ASSERT_EQ(server_.command({"SAVE"}).str, "OK");  // the restart keeps the lease
    server_.kill();
  }  // its release, in the client's background work, cannot reach Redis
  run(loop(), sleep_for(loop(), 500ms));
  server_.start();
  long long held = -1;
  // Why 10 s: far less than the lease's 20 s, far more than a retry needs.
  run(loop(), held_once_free(loop(), server_, 10s, &held));
  EXPECT_EQ(held, 0) << "the release was not tried again: the permit comes back at expiry";
}

Task<void> release_one_and_ask(Semaphore& semaphore, std::vector<std::optional<Lease>>* leases) {
  co_await leases->front()->release();
  leases->push_back(co_await semaphore.try_acquire("tenant"));
}

TEST_F(SemaphoreFailureTest, LocalFallbackGrantsThisProcessShareOfThePermits) {
  Semaphore fallback =
      semaphore(4, FailurePolicy{.kind = FailurePolicy::local_fallback, .local_share = 0.5});
  std::vector<std::optional<Lease>> leases;
  run(loop(), ask_while_down(fallback, server_, 3, &leases));
  ASSERT_TRUE(leases[0].has_value());
  ASSERT_TRUE(leases[1].has_value());
  EXPECT_EQ(leases[0]->source(), Source::fallback);
  EXPECT_FALSE(leases[2].has_value()) << "half of 4 permits in this process";
  run(loop(), release_one_and_ask(fallback, &leases));
  ASSERT_TRUE(leases.back().has_value()) << "a released fallback permit is free again";
  EXPECT_EQ(leases.back()->source(), Source::fallback);
}

}  // namespace
}  // namespace redlimit

// acquire_all() in Redis and in process: its claims reserved at one slot, the latest of their
// keys' earliest, so that it keeps its place in each key's queue; given back on a stop; asked
// again when a cancellation ahead of it moved its part on one key.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "redis/command_dispatcher.hpp"
#include "redis/subscriber.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/policy_store.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// One try_acquire() of `key`, its decision dropped.
Task<void> take_one(Limiter* limiter, std::string key) {
  static_cast<void>(co_await limiter->try_acquire(std::move(key)));
}

class AcquireAllTest : public test::LoopTest {
 protected:
  // Why: the first batch of script calls on a connection loads the batch script (several ms of
  // compiling in Redis). Paid here, it does not delay the first wake of a test's waiters past
  // the step after their slots, when an idle key expires and a waiter reserves again.
  void SetUp() override {
    Limiter warm_up(client_, Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "warm-up"});
    run(loop(), [](Limiter* limiter) -> Task<void> {
      TaskGroup batch;
      batch.add(take_one(limiter, "a"));
      batch.add(take_one(limiter, "b"));
      co_await batch.join();
    }(&warm_up));
  }
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }
  const test::RedisServer& server() const { return server_; }

 private:
  test::RedisServer server_;
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

/// What one waiting call ended with: its decision, or that it was cancelled, and when.
struct Outcome {
  std::optional<Decision> decision;
  bool cancelled = false;
  std::chrono::steady_clock::time_point ended;
};

/// acquire() of one permit of `key` after `delay`, into `out`. Why functions, not lambdas: a
/// coroutine lambda's captures die with its closure, before the coroutine ends.
Task<void> acquire_after(uv_loop_t* loop, std::chrono::milliseconds delay, Limiter* limiter,
                         std::string key, std::stop_token stop, Outcome* out) {
  co_await sleep_for(loop, delay);
  try {
    out->decision = co_await limiter->acquire(std::move(key), 1, {.max_wait = 5s, .stop = stop});
  } catch (const Cancelled&) {
    out->cancelled = true;
  }
  out->ended = std::chrono::steady_clock::now();
}

/// acquire_all(claims) after `delay`, into `out`.
Task<void> acquire_all_after(uv_loop_t* loop, std::chrono::milliseconds delay,
                             std::vector<Claim> claims, std::stop_token stop, Outcome* out) {
  co_await sleep_for(loop, delay);
  try {
    out->decision = co_await acquire_all(std::move(claims), {.max_wait = 5s, .stop = stop});
  } catch (const Cancelled&) {
    out->cancelled = true;
  }
  out->ended = std::chrono::steady_clock::now();
}

Task<void> stop_after(uv_loop_t* loop, std::chrono::milliseconds delay, std::stop_source* source) {
  co_await sleep_for(loop, delay);
  source->request_stop();
}

/// A waiter on the global key, acquire_all of the user's key and the global key, and another
/// waiter on the global key, each started once the one before has reserved; the global key's
/// burst taken first.
struct Queue {
  Outcome first, claims, second;
};

/// Waits until the global key "all" (one permit per 100 ms, its burst taken at Redis time
/// `burst_us`) holds `queued` reservations: its next permit comes that many intervals after the
/// burst's next. In process (no Redis time) a call reserves as it starts: no wait.
Task<void> until_queued(uv_loop_t* loop, Limiter& global, std::int64_t burst_us, int queued) {
  constexpr std::int64_t interval_us = 100'000;
  if (burst_us == 0) co_return;
  for (;;) {
    const Decision peeked = co_await global.peek("all");
    const std::int64_t next_us = peeked.server_time_us + peeked.retry_after.count();
    if (next_us - burst_us > queued * interval_us + interval_us / 2) co_return;
    co_await sleep_for(loop, 1ms);
  }
}

Queue queue_around_acquire_all(uv_loop_t* loop, Limiter& global, Limiter& per_user) {
  Queue out;
  const Decision burst = run(loop, global.try_acquire("all"));
  EXPECT_TRUE(burst.allowed);
  // Why each call waits for the one before to reserve: a busy machine can delay a call that
  // started first past one started 10 ms after it.
  run(loop, [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_after(loop, 0ms, &global, "all", {}, &out.first));
    co_await until_queued(loop, global, burst.server_time_us, 1);
    group.add(acquire_all_after(loop, 0ms, {{&per_user, "u"}, {&global, "all"}}, {}, &out.claims));
    co_await until_queued(loop, global, burst.server_time_us, 2);
    group.add(acquire_after(loop, 0ms, &global, "all", {}, &out.second));
    co_await group.join();
  }());
  EXPECT_TRUE(out.first.decision && out.claims.decision && out.second.decision);
  return out;
}

/// acquire_all of the user's key and the global key (2/s, its burst taken first), stopped at
/// 30 ms; then, at 510 ms, whether the global key allows a permit (its slot, at 500 ms, is free
/// again: kept, the next permit would wait until 1 s). Why 2/s: the stop, however late a busy
/// machine makes it, comes long before the slot.
struct Stopped {
  Outcome claims;
  std::chrono::steady_clock::duration lasted{};
  bool slot_free_again = false;
};

Stopped stopped_while_waiting(uv_loop_t* loop, Limiter& global, Limiter& per_user) {
  Stopped out;
  EXPECT_TRUE(run(loop, global.try_acquire("all")).allowed);
  std::stop_source source;
  const auto started = std::chrono::steady_clock::now();
  run(loop, [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_all_after(loop, 0ms, {{&per_user, "u"}, {&global, "all"}}, source.get_token(),
                                &out.claims));
    group.add(stop_after(loop, 30ms, &source));
    co_await group.join();
  }());
  out.lasted = out.claims.ended - started;
  run(loop, sleep_for(loop, std::chrono::duration_cast<std::chrono::microseconds>(
                                started + 510ms - std::chrono::steady_clock::now())));
  out.slot_free_again = run(loop, global.try_acquire("all")).allowed;
  return out;
}

/// The user's key (1/s, burst 1, its permit taken) binds acquire_all at 1 s. On the global key
/// (burst 1, taken: `burst`), a waiter ahead of acquire_all is cancelled at 40 ms, which moves
/// acquire_all's part there 100 ms earlier; right after acquire_all, another take of the global
/// key (`other`).
struct Moved {
  Decision burst;
  Outcome ahead, claims;
  std::optional<Decision> other;
};

Moved moved_by_a_cancellation(uv_loop_t* loop, Limiter& global, Limiter& per_user) {
  Moved out;
  out.burst = run(loop, global.try_acquire("all"));
  EXPECT_TRUE(out.burst.allowed);
  EXPECT_TRUE(run(loop, per_user.try_acquire("u")).allowed);
  std::stop_source cancel_ahead;
  run(loop, [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_after(loop, 0ms, &global, "all", cancel_ahead.get_token(), &out.ahead));
    group.add(acquire_all_after(loop, 10ms, {{&per_user, "u"}, {&global, "all"}}, {}, &out.claims));
    group.add(stop_after(loop, 40ms, &cancel_ahead));
    co_await group.join();
    out.other = co_await global.try_acquire("all");
  }());
  EXPECT_TRUE(out.ahead.cancelled);
  EXPECT_TRUE(out.claims.decision && out.claims.decision->allowed);
  return out;
}

/// Two keys of one limiter (2/s, burst 1: a slot every 500 ms), each's burst taken
/// (`burst`); acquire_all of both (`ahead`), then 10 ms later another (`behind`), and `ahead`
/// stopped at 40 ms: the cancellations move both of behind's parts alike, to ahead's slot.
struct MovedAlike {
  Decision burst;
  Outcome ahead, behind;
  std::chrono::steady_clock::time_point started;
};

MovedAlike moved_alike_by_cancellations(uv_loop_t* loop, Limiter& limiter) {
  MovedAlike out;
  std::vector<Claim> both{{&limiter, "a"}, {&limiter, "b"}};
  out.burst = run(loop, try_acquire_all(std::move(both)));
  EXPECT_TRUE(out.burst.allowed);
  std::stop_source cancel_ahead;
  out.started = std::chrono::steady_clock::now();
  run(loop, [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_all_after(loop, 0ms, {{&limiter, "a"}, {&limiter, "b"}},
                                cancel_ahead.get_token(), &out.ahead));
    group.add(acquire_all_after(loop, 10ms, {{&limiter, "a"}, {&limiter, "b"}}, {}, &out.behind));
    group.add(stop_after(loop, 40ms, &cancel_ahead));
    co_await group.join();
  }());
  EXPECT_TRUE(out.ahead.cancelled);
  EXPECT_TRUE(out.behind.decision && out.behind.decision->allowed);
  return out;
}

TEST_F(AcquireAllTest, KeepsItsPlaceInTheQueueOfTheKeyThatBinds) {
  // The global key admits one permit per 100 ms; a waiter, then acquire_all, then another
  // waiter queue on it. Asking again at each retry_after, acquire_all was overtaken by every
  // waiter that reserved meanwhile.
  Limiter global(client(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "fifo-global"});
  Limiter per_user(client(), Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "fifo-user"});
  const Queue queue = queue_around_acquire_all(loop(), global, per_user);
  const auto& [first, claims, second] = queue;
  ASSERT_TRUE(first.decision && claims.decision && second.decision);
  ASSERT_TRUE(first.decision->allowed && claims.decision->allowed && second.decision->allowed);
  EXPECT_LT(first.decision->server_time_us, claims.decision->server_time_us);
  EXPECT_LT(claims.decision->server_time_us, second.decision->server_time_us)
      << "the waiter that came after acquire_all went first";
  EXPECT_EQ(claims.decision->claim, 1u) << "the global key bound";
  // Why in Redis time, not Decision::waited: a busy machine can start acquire_all so late that
  // its slot is almost due (it waited 7 ms).
  EXPECT_GE(claims.decision->server_time_us - first.decision->server_time_us, 100'000);
  EXPECT_GE(second.decision->server_time_us - claims.decision->server_time_us, 100'000);
}

TEST_F(AcquireAllTest, AStopWhileWaitingGivesItsSlotBack) {
  Limiter global(client(), Policy::of(Limit::gcra({2, 1s}, 1)), {.name = "stop-global"});
  Limiter per_user(client(), Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "stop-user"});
  const Stopped stopped = stopped_while_waiting(loop(), global, per_user);
  EXPECT_TRUE(stopped.claims.cancelled);
  EXPECT_LT(stopped.lasted, 400ms) << "ended by the stop";
  EXPECT_TRUE(stopped.slot_free_again);
}

/// Takes the burst of every key of `claims` (of a gcra limiter named `name`) with acquire_all(),
/// which watches the keys, and waits until their subscriptions are confirmed. Why: a waiter
/// registered before its key's subscription is confirmed asks where it stands once it is, one
/// script call more; the tests below count the calls of keys already watched.
Task<void> take_bursts_of_watched_keys(Client& client, std::vector<Claim> claims,
                                       std::string name) {
  const Decision taken = co_await acquire_all(claims);
  if (!taken.allowed) throw std::runtime_error("the bursts were taken already");
  for (const Claim& claim : claims) {
    const std::string channel = "rl:{" + name + ":" + claim.key + "}:gcra:0:cancelled";
    co_await client.dispatcher().subscriber().confirmed(channel,
                                                        std::chrono::steady_clock::now() + 5s);
  }
}

TEST_F(AcquireAllTest, ItsPartsOnOneServerAreReservedInOneScriptCallAndAskedInOneAtTheWake) {
  Limiter limiter(client(), Policy::of(Limit::gcra({2, 1s}, 1)), {.name = "one-call"});
  const std::vector<Claim> three{{&limiter, "a"}, {&limiter, "b"}, {&limiter, "c"}};
  run(loop(), take_bursts_of_watched_keys(client(), three, "one-call"));  // next slots: 500 ms on
  const long long before = server().script_calls();
  const Decision decision = run(loop(), acquire_all(three, {.max_wait = 5s}));
  EXPECT_TRUE(decision.allowed);
  EXPECT_GT(decision.waited, 0ms);
  EXPECT_EQ(server().script_calls() - before, 2)
      << "one call reserves the three parts, one asks where they stand at the wake";
}

TEST_F(AcquireAllTest, AStopGivesEveryPartOnOneServerBackInOneScriptCall) {
  Limiter limiter(client(), Policy::of(Limit::gcra({1, 5s}, 1)), {.name = "one-give-back"});
  const std::vector<Claim> three{{&limiter, "a"}, {&limiter, "b"}, {&limiter, "c"}};
  run(loop(), take_bursts_of_watched_keys(client(), three, "one-give-back"));  // next: 5 s on
  const long long before = server().script_calls();
  std::stop_source source;
  Outcome outcome;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_all_after(loop(), 0ms, three, source.get_token(), &outcome));
    group.add(stop_after(loop(), 30ms, &source));
    co_await group.join();
  }());
  EXPECT_TRUE(outcome.cancelled);
  EXPECT_EQ(server().script_calls() - before, 2)
      << "one call reserves the three parts, one gives them back";
}

TEST_F(AcquireAllTest, APartMovedByACancellationAheadOfItIsNotUsedWhereItNoLongerIs) {
  // Used at 1 s as reserved, the moved part would join the permit the global key, idle by
  // then, gives another request at that moment: 2 permits where 1 is allowed.
  const Limit global_limit = Limit::gcra({10, 1s}, 1);
  Limiter global(client(), Policy::of(global_limit), {.name = "moved-global"});
  Limiter per_user(client(), Policy::of(Limit::gcra({1, 1s}, 1)), {.name = "moved-user"});
  const Moved moved = moved_by_a_cancellation(loop(), global, per_user);
  ASSERT_TRUE(moved.claims.decision && moved.claims.decision->allowed && moved.other);
  EXPECT_EQ(moved.claims.decision->claim, 0u) << "the user's key bound";
  std::vector<test::Admit> admits{{moved.burst.server_time_us, 1},
                                  {moved.claims.decision->server_time_us, 1}};
  if (moved.other->allowed) admits.push_back({moved.other->server_time_us, 1});
  const test::CheckResult check = test::check_admits(global_limit, admits);
  EXPECT_TRUE(check) << check.description;
}

TEST_F(AcquireAllTest, PartsMovedAlikeByCancellationsAheadAreUsedWhereTheyStand) {
  // Issue 33, bug 1: acquire_all did not hear the notices; it slept until the slot reserved
  // (1 s), found its parts moved and reserved again at the back (1.5 s).
  const Limit limit = Limit::gcra({2, 1s}, 1);
  Limiter limiter(client(), Policy::of(limit), {.name = "moved-alike"});
  const MovedAlike moved = moved_alike_by_cancellations(loop(), limiter);
  ASSERT_TRUE(moved.behind.decision && moved.behind.decision->allowed);
  EXPECT_EQ(moved.behind.decision->server_time_us, moved.burst.server_time_us + 500'000)
      << "used where ahead's slot was, 500 ms after the burst";
  const test::CheckResult check = test::check_admits(
      limit, {{moved.burst.server_time_us, 1}, {moved.behind.decision->server_time_us, 1}});
  EXPECT_TRUE(check) << check.description;
}

Task<void> store_after(uv_loop_t* loop, std::chrono::milliseconds delay, PolicyStore* store,
                       std::string name, Policy policy) {
  co_await sleep_for(loop, delay);
  co_await store->set(std::move(name), std::move(policy));
}

TEST_F(AcquireAllTest, AWaitUnderAPolicyThatChangedIsReservedAgainUnderTheNewOne) {
  // Left from issue 32: acquire() reserves again when the policy it waits under is replaced;
  // acquire_all kept its slot, and was admitted under the old version. The global key (a
  // follower of "changing-global": 1/s, burst 1, its permit taken) binds a 1 s wait; at 50 ms
  // the stored policy becomes 10/s.
  PolicyStore store(client());
  run(loop(), store.set("changing-global", Policy::of(Limit::gcra({1, 1s}, 1))));
  Limiter global(client(), LimiterOptions{.name = "changing-global"});
  Limiter per_user(client(), Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "changing-user"});
  ASSERT_TRUE(run(loop(), global.try_acquire("all")).allowed);
  Outcome claims;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(acquire_all_after(loop(), 0ms, {{&per_user, "u"}, {&global, "all"}}, {}, &claims));
    group.add(
        store_after(loop(), 50ms, &store, "changing-global", Policy::of(Limit::gcra({10, 1s}, 1))));
    co_await group.join();
  }());
  ASSERT_TRUE(claims.decision && claims.decision->allowed);
  // Admitted under the old version, the global key binds (its 1 s wait) and names version 1;
  // reserved again, the decision names the binding claim's version in force (2, or the user's
  // fixed policy's 0).
  EXPECT_NE(claims.decision->policy_version, 1)
      << "admitted under the version it reserved under, not the one in force";
}

using AcquireAllInProcessTest = test::LoopTest;

TEST_F(AcquireAllInProcessTest, KeepsItsPlaceInTheQueueOfTheKeyThatBinds) {
  Limiter global(loop(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "local-fifo-global"});
  Limiter per_user(loop(), Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "local-fifo-user"});
  const Queue queue = queue_around_acquire_all(loop(), global, per_user);
  const auto& [first, claims, second] = queue;
  ASSERT_TRUE(first.decision && claims.decision && second.decision);
  ASSERT_TRUE(first.decision->allowed && claims.decision->allowed && second.decision->allowed);
  EXPECT_EQ(claims.decision->source, Source::local);
  EXPECT_LT(first.ended, claims.ended);
  EXPECT_LT(claims.ended, second.ended) << "the waiter that came after acquire_all went first";
  EXPECT_EQ(claims.decision->claim, 1u) << "the global key bound";
  EXPECT_GT(claims.decision->waited, 50ms) << "it waited for the global key";
}

TEST_F(AcquireAllInProcessTest, LimitersOfOneNameKeepTheirOwnStateAndAreNotOneKey) {
  // Two in-process limiters hold separate state, whatever their names: claiming the same key
  // of each is two claims (as try_acquire_all takes them), not one key claimed twice.
  Limiter first(loop(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "twin"});
  Limiter second(loop(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "twin"});
  std::vector<Claim> tried{{&first, "k"}, {&second, "k"}};
  EXPECT_TRUE(run(loop(), try_acquire_all(std::move(tried))).allowed);
  std::vector<Claim> waited{{&first, "k"}, {&second, "k"}};
  const Decision decision = run(loop(), acquire_all(std::move(waited), {.max_wait = 1s}));
  EXPECT_TRUE(decision.allowed);
  EXPECT_GT(decision.waited, 50ms) << "each key's next permit, 100 ms after the first";
}

TEST_F(AcquireAllInProcessTest, AStopWhileWaitingGivesItsSlotBack) {
  Limiter global(loop(), Policy::of(Limit::gcra({2, 1s}, 1)), {.name = "local-stop-global"});
  Limiter per_user(loop(), Policy::of(Limit::gcra({100, 1s}, 10)), {.name = "local-stop-user"});
  const Stopped stopped = stopped_while_waiting(loop(), global, per_user);
  EXPECT_TRUE(stopped.claims.cancelled);
  EXPECT_LT(stopped.lasted, 400ms) << "ended by the stop";
  EXPECT_TRUE(stopped.slot_free_again);
}

TEST_F(AcquireAllInProcessTest, APartMovedByACancellationAheadOfItIsNotUsedWhereItNoLongerIs) {
  // In process a decision carries no time: the take right after acquire_all, on a key of burst
  // 1 that gave acquire_all its permit at its wake, is denied.
  Limiter global(loop(), Policy::of(Limit::gcra({10, 1s}, 1)), {.name = "local-moved-global"});
  Limiter per_user(loop(), Policy::of(Limit::gcra({1, 1s}, 1)), {.name = "local-moved-user"});
  const Moved moved = moved_by_a_cancellation(loop(), global, per_user);
  ASSERT_TRUE(moved.claims.decision && moved.claims.decision->allowed && moved.other);
  EXPECT_EQ(moved.claims.decision->claim, 0u) << "the user's key bound";
  EXPECT_FALSE(moved.other->allowed) << "the global key gave acquire_all its permit at its wake";
}

TEST_F(AcquireAllInProcessTest, PartsMovedAlikeByCancellationsAheadAreUsedWhereTheyStand) {
  // In process a decision carries no time: woken at ahead's slot (500 ms), not at its own
  // (1 s), nor reserved again at the back (1.5 s).
  Limiter limiter(loop(), Policy::of(Limit::gcra({2, 1s}, 1)), {.name = "local-moved-alike"});
  const MovedAlike moved = moved_alike_by_cancellations(loop(), limiter);
  ASSERT_TRUE(moved.behind.decision && moved.behind.decision->allowed);
  EXPECT_LT(moved.behind.ended - moved.started, 800ms);
}

}  // namespace
}  // namespace redlimit

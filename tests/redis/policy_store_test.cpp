#include "redlimit/policy_store.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <stop_token>
#include <thread>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/child_process.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/started_task.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

/// A policy store on a private redis-server.
class PolicyStoreTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }
  Client& client() { return client_; }

  test::RedisServer server_;

 private:
  Client client_{loop(), ClientOptions{.url = server_.url()}};
};

TEST_F(PolicyStoreTest, TrySetStoresOnlyWhenNothingIsStored) {
  PolicyStore store(client());
  EXPECT_TRUE(run(loop(), store.try_set("sms", Policy::parse("gcra 10/s"))));
  EXPECT_FALSE(run(loop(), store.try_set("sms", Policy::parse("gcra 99/s"))));
  EXPECT_EQ(run(loop(), store.get("sms")), Policy::parse("gcra 10/s"));
}

TEST_F(PolicyStoreTest, SetReplacesAndEveryChangeHasALargerVersion) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("gcra 10/s")));
  const std::optional<PolicyRecord> first = run(loop(), store.record("sms"));
  ASSERT_TRUE(first);
  run(loop(), store.set("sms", Policy::parse("token_bucket 5/min burst 7"), Carry::proportional));
  const std::optional<PolicyRecord> second = run(loop(), store.record("sms"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->policy, Policy::parse("token_bucket 5/min burst 7"));
  EXPECT_EQ(second->carry, Carry::proportional);
  EXPECT_GT(second->version, first->version);
  EXPECT_GE(second->since_us, first->since_us);
  EXPECT_GT(first->since_us, 0);
}

TEST_F(PolicyStoreTest, GetOfANameWithNothingStoredIsEmpty) {
  PolicyStore store(client());
  EXPECT_EQ(run(loop(), store.get("nothing")), std::nullopt);
  EXPECT_EQ(run(loop(), store.record("nothing")), std::nullopt);
}

TEST_F(PolicyStoreTest, RemoveKeepsTheVersionSoALaterPolicyGetsALargerOne) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("gcra 10/s")));
  run(loop(), store.set_override("sms", "vip", Policy::parse("gcra 100/s")));
  const std::int64_t before = run(loop(), store.record("sms"))->version;
  run(loop(), store.remove("sms"));
  EXPECT_EQ(run(loop(), store.get("sms")), std::nullopt);
  EXPECT_TRUE(run(loop(), store.read("sms")).overrides.empty());
  EXPECT_TRUE(run(loop(), store.try_set("sms", Policy::parse("gcra 1/s"))));
  EXPECT_GT(run(loop(), store.record("sms"))->version, before + 1);
}

TEST_F(PolicyStoreTest, OverridesAreStoredPerKeyAndRemoved) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 10/s")));
  run(loop(), store.set_override("api", "tenant:{gold}", Policy::parse("gcra 1000/s")));
  StoredPolicies stored = run(loop(), store.read("api"));
  ASSERT_EQ(stored.overrides.size(), 1u);
  EXPECT_EQ(stored.overrides.at("tenant:{gold}").policy, Policy::parse("gcra 1000/s"));
  EXPECT_EQ(stored.overrides.at("tenant:{gold}").version, stored.version);
  run(loop(), store.remove_override("api", "tenant:{gold}"));
  EXPECT_TRUE(run(loop(), store.read("api")).overrides.empty());
  EXPECT_EQ(run(loop(), store.get("api")), Policy::parse("gcra 10/s"));
}

TEST_F(PolicyStoreTest, TheScopeIsStoredWithThePolicy) {
  PolicyStore store(client());
  Policy policy = Policy::parse("gcra 10/s");
  policy.scope = Scope::per_client;
  run(loop(), store.set("api", policy));
  EXPECT_EQ(run(loop(), store.get("api")), policy);
}

// Issue 32, bug 5: from per_client to overall the overall key started fresh, admitting the
// limit again on top of what every client had taken. A scope change cannot carry (the clients'
// keys are not known), so it is made only as a reset, which says so.
TEST_F(PolicyStoreTest, AScopeChangeIsRefusedUnlessItIsAReset) {
  PolicyStore store(client());
  const Policy per_client = Policy::parse("gcra 10/h; scope per_client");
  const Policy overall = Policy::parse("gcra 10/h");
  run(loop(), store.set("api", per_client));
  EXPECT_THROW(run(loop(), store.set("api", overall)), InvalidArgument);
  EXPECT_THROW(run(loop(), store.set("api", overall, Carry::proportional)), InvalidArgument);
  EXPECT_EQ(run(loop(), store.get("api")), per_client) << "a refused change stores nothing";
  EXPECT_THROW(run(loop(), store.set_override("api", "vip", overall)), InvalidArgument);
  run(loop(), store.set("api", overall, Carry::reset));
  EXPECT_EQ(run(loop(), store.get("api")), overall);
  EXPECT_THROW(run(loop(), store.set("api", per_client)), InvalidArgument);
}

// Found in review (not named by an issue): the rule above looked at the name's policy only, so
// overrides could be left in the other scope; a key returned from one to the name's policy
// then started afresh under the other scope, as a change of scope without a reset.
TEST_F(PolicyStoreTest, TheOverridesKeepTheScopeOfTheNamesPolicy) {
  PolicyStore store(client());
  const Policy per_client = Policy::parse("gcra 10/h; scope per_client");
  const Policy overall = Policy::parse("gcra 10/h");
  run(loop(), store.set_override("api", "vip", per_client));
  EXPECT_THROW(run(loop(), store.try_set("api", overall)), InvalidArgument)
      << "an override of the other scope was stored first";
  EXPECT_THROW(run(loop(), store.set_override("api", "gold", overall)), InvalidArgument);
  run(loop(), store.set("api", per_client));
  EXPECT_THROW(run(loop(), store.set("api", overall, Carry::reset)), InvalidArgument)
      << "the override of the other scope remains";
  EXPECT_EQ(run(loop(), store.get("api")), per_client) << "a refused change stores nothing";
  run(loop(), store.remove_override("api", "vip"));
  run(loop(), store.set("api", overall, Carry::reset));
  EXPECT_EQ(run(loop(), store.get("api")), overall) << "no override of the other scope remains";
}

TEST_F(PolicyStoreTest, AnInvalidPolicyIsRefusedBeforeAnythingIsStored) {
  PolicyStore store(client());
  EXPECT_THROW(run(loop(), store.set("api", Policy::parse("gcra 0/s"))), InvalidArgument);
  EXPECT_THROW(run(loop(), store.set("api", Policy{})), InvalidArgument);
  EXPECT_EQ(run(loop(), store.get("api")), std::nullopt);
}

TEST_F(PolicyStoreTest, NamesAreEscapedSoThatTheyNeverShareARecord) {
  PolicyStore store(client());
  run(loop(), store.set("a}:b", Policy::parse("gcra 1/s")));
  run(loop(), store.set("a", Policy::parse("gcra 2/s")));
  EXPECT_EQ(run(loop(), store.get("a}:b")), Policy::parse("gcra 1/s"));
  EXPECT_EQ(run(loop(), store.get("a")), Policy::parse("gcra 2/s"));
}

/// How many of `count` calls of try_acquire(key) `limiter` admits.
int admitted(uv_loop_t* loop, Limiter& limiter, const std::string& key, int count) {
  int allowed = 0;
  for (int i = 0; i < count; ++i)
    allowed += run(loop, limiter.try_acquire(key)).allowed ? 1 : 0;
  return allowed;
}

TEST_F(PolicyStoreTest, AFollowerDecidesUnderTheStoredPolicyAndSaysItsVersion) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("fixed_window 3/min")));
  const std::int64_t version = run(loop(), store.record("sms"))->version;
  Limiter limiter(client(), LimiterOptions{.name = "sms"});
  const Decision first = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.limit, 3);
  EXPECT_EQ(first.policy_version, version);
  EXPECT_EQ(admitted(loop(), limiter, "k", 5), 2);
  EXPECT_EQ(limiter.policy(), Policy::parse("fixed_window 3/min"));
}

/// The limiter stats of `name` in `metrics`.
LimiterStats stats_of(const Metrics& metrics, const std::string& name) {
  for (LimiterStats& stats : metrics.snapshot().limiters) {
    if (stats.name == name) return stats;
  }
  return {};
}

/// Waits (a bounded number of short sleeps) until `limiter` has read `policy`.
Task<bool> until_read(uv_loop_t* loop, Limiter& limiter, Policy policy) {
  for (int i = 0; i < 400; ++i) {
    if (limiter.policy() == policy) co_return true;
    co_await sleep_for(loop, std::chrono::milliseconds(5));
  }
  co_return false;
}

TEST_F(PolicyStoreTest, AFollowerShowsTheVersionAndTheLimitsItFollowsInTheMetrics) {
  PolicyStore store(client());
  run(loop(), store.set("shown", Policy::parse("gcra 10/s")));
  Limiter limiter(client(), LimiterOptions{.name = "shown"});
  const Decision first = run(loop(), limiter.try_acquire("k"));
  LimiterStats stats = stats_of(*client().metrics(), "shown");
  EXPECT_EQ(stats.policy_version, first.policy_version);
  EXPECT_EQ(stats.policy_limits, Policy::parse("gcra 10/s").limits);

  const Policy tighter = Policy::parse("gcra 5/s; fixed_window 100/day");
  run(loop(), store.set("shown", tighter));
  const std::int64_t version = run(loop(), store.record("shown"))->version;
  ASSERT_TRUE(run(loop(), until_read(loop(), limiter, tighter))) << "the notice is followed";
  stats = stats_of(*client().metrics(), "shown");
  EXPECT_EQ(stats.policy_version, version) << "without a decision under it yet";
  EXPECT_EQ(stats.policy_limits, tighter.limits);
}

TEST_F(PolicyStoreTest, AFollowersDenialFromTheDenyCacheSaysItsVersion) {
  PolicyStore store(client());
  run(loop(), store.set("sms", Policy::parse("fixed_window 1/min")));
  const std::int64_t version = run(loop(), store.record("sms"))->version;
  Limiter limiter(client(), LimiterOptions{.name = "sms", .deny_cache = true});
  ASSERT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  ASSERT_EQ(run(loop(), limiter.try_acquire("k")).source, Source::redis);  // remembered
  const Decision cached = run(loop(), limiter.try_acquire("k"));
  EXPECT_EQ(cached.source, Source::deny_cache);
  EXPECT_EQ(cached.policy_version, version);
}

TEST_F(PolicyStoreTest, AFollowerStartedBeforeAnyPolicyFailsTypedThenFollowsOnceOneIsStored) {
  Limiter limiter(client(), LimiterOptions{.name = "late"});
  EXPECT_THROW(run(loop(), limiter.try_acquire("k")), PolicyNotFound);
  EXPECT_THROW(run(loop(), limiter.acquire("k")), PolicyNotFound);
  EXPECT_THROW(run(loop(), limiter.peek("k")), PolicyNotFound);
  PolicyStore store(client());
  run(loop(), store.set("late", Policy::parse("gcra 2/min")));
  EXPECT_EQ(admitted(loop(), limiter, "k", 3), 2);
}

TEST_F(PolicyStoreTest, AFollowerWithNothingStoredNamesItsNameInTheError) {
  Limiter limiter(client(), LimiterOptions{.name = "unstored"});
  try {
    run(loop(), limiter.try_acquire("k"));
    ADD_FAILURE() << "decided with no policy stored";
  } catch (const PolicyNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("'unstored'"), std::string::npos) << e.what();
    EXPECT_TRUE(e.store_read()) << "the store answered: it holds nothing under the name";
  }
}

TEST_F(PolicyStoreTest, AFollowerFollowsAChangeMadeByAnotherClient) {
  Client other(loop(), ClientOptions{.url = server_.url()});
  PolicyStore store(other);
  run(loop(), store.set("api", Policy::parse("gcra 1/min")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(admitted(loop(), limiter, "k", 2), 1);

  run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
  const std::int64_t version = run(loop(), store.record("api"))->version;
  const auto changed = std::chrono::steady_clock::now();
  // Peeks until a decision is made under the new version: the notice's round trip.
  while (run(loop(), limiter.peek("k")).policy_version != version)
    run(loop(), sleep_for(loop(), 200us));
  std::printf("a change reached the follower in %.2f ms (notice, then a read)\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - changed)
                  .count());
  EXPECT_EQ(run(loop(), limiter.try_acquire("k")).limit, 1000);
  run(loop(), other.close());
}

/// Stores `count` overrides of "api", all at once.
Task<void> override_many(PolicyStore& store, int count) {
  TaskGroup group;
  for (int i = 0; i < count; ++i)
    group.add(store.set_override("api", "key-" + std::to_string(i), Policy::parse("gcra 5/min")));
  co_await group.join();
}

/// Takes a permit of `limiter`'s key "k" into `*decision`.
Task<void> decide_into(Limiter& limiter, Decision* decision) {
  *decision = co_await limiter.try_acquire("k");
}

// Found in review (not named by an issue): each read that a notice arrived during starts the
// next as it ends, and a call waited until no read was going on: while changes kept being
// announced, a new follower's first call waited for its deadline, though the first read that
// ended gave it what it needed.
TEST_F(PolicyStoreTest, AFirstCallWhileChangesKeepBeingAnnouncedWaitsForOneReadNotForThemAll) {
  // Why a long deadline: the overrides below are stored all at once, which a sanitizer build
  // takes seconds to send and answer.
  Client other(loop(), ClientOptions{.url = server_.url(), .command_timeout = 60s});
  PolicyStore store(other);
  run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
  // Why so many overrides: each read takes long enough that notices arrive during every one.
  run(loop(), override_many(store, 5000));
  // A deadline the call never reaches here: it ends only once a read ends.
  Client follower_client(loop(), ClientOptions{.url = server_.url(), .command_timeout = 60s});
  Limiter first(follower_client, LimiterOptions{.name = "api"});
  EXPECT_EQ(run(loop(), first.try_acquire("k")).source, Source::redis);  // subscribed
  // Changes announced without end (as a store changed in a loop announces them), up to a
  // bound: a notice arrives during every read.
  constexpr long most_notices = 1'000'000;
  std::atomic<long> announced = 0;
  std::atomic<bool> stop = false;
  const auto announce = [this, &stop, &announced] {
    const std::vector<std::vector<std::string>> notices(
        1000, std::vector<std::string>{"PUBLISH", "rl:policy:{api}:changed", "1"});
    while (!stop && announced < most_notices) {
      server_.commands(notices);
      announced += 1000;
    }
  };
  std::thread announcing[] = {std::thread(announce), std::thread(announce)};
  while (announced < 1000)
    run(loop(), sleep_for(loop(), 1ms));
  Limiter limiter(follower_client, LimiterOptions{.name = "api"});  // a follower of its own
  Decision decision;
  {
    test::StartedTask deciding = test::start(decide_into(limiter, &decision));
    while (!deciding.done() && announced < most_notices)
      uv_run(loop(), UV_RUN_NOWAIT);
    EXPECT_TRUE(deciding.done()) << "the first call still waited after " << most_notices
                                 << " notices: it waits for the reads to stop";
    stop = true;
    for (std::thread& thread : announcing)
      thread.join();
    while (!deciding.done())
      uv_run(loop(), UV_RUN_ONCE);
  }
  EXPECT_EQ(decision.source, Source::redis);
  run(loop(), follower_client.close());
  run(loop(), other.close());
}

TEST_F(PolicyStoreTest, AChangeMadeRightAfterTheFirstCallIsSeenByItsNoticeNotAtTheRefresh) {
  // Database 1: each connection's handshake (SELECT) takes a round trip before it subscribes.
  const std::string url = server_.url() + "/1";
  Client other(loop(), ClientOptions{.url = url});
  PolicyStore store(other);
  run(loop(), store.set("api", Policy::parse("gcra 1/min")));
  // The follower runs on a loop of its own, idle while the policy changes.
  uv_loop_t follower_loop;
  ASSERT_EQ(uv_loop_init(&follower_loop), 0);
  {
    Client follower_client(&follower_loop, ClientOptions{.url = url});
    // Why: with its commands' connection open, the follower's first read takes one round trip,
    // fewer than opening the pub/sub connection and subscribing.
    run(&follower_loop, PolicyStore(follower_client).record("api"));
    Limiter limiter(follower_client, LimiterOptions{.name = "api", .policy_refresh = 1h});
    EXPECT_TRUE(run(&follower_loop, limiter.try_acquire("k")).allowed);

    run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
    const std::int64_t version = run(loop(), store.record("api"))->version;
    const auto changed = std::chrono::steady_clock::now();
    // Without the notice the change would be seen only at the refresh, an hour later.
    while (run(&follower_loop, limiter.peek("k")).policy_version != version &&
           std::chrono::steady_clock::now() - changed < 10s)
      run(&follower_loop, sleep_for(&follower_loop, 1ms));
    EXPECT_EQ(run(&follower_loop, limiter.peek("k")).policy_version, version)
        << "a change made right after the first call was not announced to the follower";
    std::printf(
        "a change right after the first call reached the follower in %.2f ms (notice)\n",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - changed)
            .count());
    run(&follower_loop, follower_client.close());
  }
  EXPECT_EQ(uv_loop_close(&follower_loop), 0);
  run(loop(), other.close());
}

TEST_F(PolicyStoreTest, AChangeMadeWhileThePubSubConnectionWasDownIsReadOnceItIsBack) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 1/min")));
  // The follower runs on a loop of its own, idle while its pub/sub connection is down.
  uv_loop_t follower_loop;
  ASSERT_EQ(uv_loop_init(&follower_loop), 0);
  {
    Client follower_client(&follower_loop, ClientOptions{.url = server_.url()});
    Limiter limiter(follower_client, LimiterOptions{.name = "api", .policy_refresh = 1h});
    EXPECT_TRUE(run(&follower_loop, limiter.try_acquire("k")).allowed);
    // Confirmed: a notice published now would reach the follower.
    while (server_.command({"PUBSUB", "CHANNELS"}).elements.empty())
      run(&follower_loop, sleep_for(&follower_loop, 1ms));

    server_.command({"CLIENT", "KILL", "TYPE", "pubsub"});
    run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
    const std::int64_t version = run(loop(), store.record("api"))->version;
    const auto changed = std::chrono::steady_clock::now();
    // Without a read once subscribed again, the change would be seen at the refresh, in an hour.
    while (run(&follower_loop, limiter.peek("k")).policy_version != version &&
           std::chrono::steady_clock::now() - changed < 10s)
      run(&follower_loop, sleep_for(&follower_loop, 1ms));
    EXPECT_EQ(run(&follower_loop, limiter.peek("k")).policy_version, version)
        << "a change made while the pub/sub connection was down was not read once it was back";
    run(&follower_loop, follower_client.close());
  }
  EXPECT_EQ(uv_loop_close(&follower_loop), 0);
}

TEST_F(PolicyStoreTest, AFirstCallDestroyedWhileThePolicyIsReadLeavesLaterCallsWorking) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 5/min")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  auto call = [](Limiter& limiter) -> Task<void> {
    const Decision decision = co_await limiter.try_acquire("k");
    EXPECT_TRUE(decision.allowed);
  };
  {
    test::StartedTask abandoned = test::start(call(limiter));
    EXPECT_FALSE(abandoned.done());  // its read is in flight
  }
  test::StartedTask next = test::start(call(limiter));
  const auto started = std::chrono::steady_clock::now();
  while (!next.done() && std::chrono::steady_clock::now() - started < 10s)
    run(loop(), sleep_for(loop(), 1ms));
  ASSERT_TRUE(next.done()) << "the read of the destroyed call left the follower waiting forever";
  if (next.error()) std::rethrow_exception(next.error());
}

TEST_F(PolicyStoreTest, AFollowerResetsAKeyUnderItsStoredPolicy) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 2/min")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(admitted(loop(), limiter, "k", 3), 2);
  run(loop(), limiter.reset("k"));
  EXPECT_EQ(admitted(loop(), limiter, "k", 3), 2);
}

TEST_F(PolicyStoreTest, AFollowerRefusedAsStaleReadsThePolicyAgainAndAsksOnceMore) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 5/min")));
  // The stale follower runs on a loop of its own, idle while the policy changes: it cannot see
  // the change's notice before its next call is sent under the old version.
  uv_loop_t stale_loop;
  ASSERT_EQ(uv_loop_init(&stale_loop), 0);
  {
    Client stale_client(&stale_loop, ClientOptions{.url = server_.url()});
    Limiter stale(stale_client, LimiterOptions{.name = "api", .policy_refresh = 1h});
    const std::int64_t old_version = run(&stale_loop, stale.try_acquire("k")).policy_version;

    run(loop(), store.set("api", Policy::parse("fixed_window 50/min")));
    const std::int64_t new_version = run(loop(), store.record("api"))->version;
    ASSERT_GT(new_version, old_version);
    Limiter current(client(), LimiterOptions{.name = "api"});
    EXPECT_EQ(run(loop(), current.try_acquire("k")).policy_version, new_version);

    const Decision decision = run(&stale_loop, stale.try_acquire("k"));
    EXPECT_TRUE(decision.allowed);
    EXPECT_EQ(decision.policy_version, new_version);
    EXPECT_EQ(decision.limit, 50);
    run(&stale_loop, stale_client.close());
  }
  EXPECT_EQ(uv_loop_close(&stale_loop), 0);
}

/// acquire_all() of `limiter`'s keys "a" and "b", stopped by `stop`: what it ended with.
Task<void> stopped_acquire_all(Limiter& limiter, std::stop_token stop, std::string* ended) {
  std::vector<Claim> claims{{&limiter, "a"}, {&limiter, "b"}};
  try {
    const Decision decision = co_await acquire_all(std::move(claims), {.stop = stop});
    *ended = decision.allowed ? "granted" : "denied";
  } catch (const Cancelled&) {
    *ended = "cancelled";
  }
}

// Found in review (not named by an issue): acquire_all() did not hand its stop request to the
// retries of a stale-policy refusal, as acquire() does; stopped while its call was in flight, it
// read the policy again and asked once more, until granted.
TEST_F(PolicyStoreTest, AStoppedAcquireAllRefusedAsStaleEndsCancelledWithoutAskingAgain) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 5/min")));
  // As above: the stale follower cannot see the change's notice before its call is sent.
  uv_loop_t stale_loop;
  ASSERT_EQ(uv_loop_init(&stale_loop), 0);
  {
    Client stale_client(&stale_loop, ClientOptions{.url = server_.url(), .command_timeout = 5s});
    Limiter stale(stale_client, LimiterOptions{.name = "api", .policy_refresh = 1h});
    run(&stale_loop, stale.try_acquire("a"));
    run(loop(), store.set("api", Policy::parse("fixed_window 50/min")));
    Limiter current(client(), LimiterOptions{.name = "api"});
    EXPECT_TRUE(run(loop(), current.try_acquire("a")).allowed);  // "a" is at the new version

    std::stop_source stop;
    std::string ended;
    server_.pause();
    {
      test::StartedTask waiting = test::start(stopped_acquire_all(stale, stop.get_token(), &ended));
      run(&stale_loop, sleep_for(&stale_loop, 20ms));  // sent; Redis has not run it
      stop.request_stop();
      server_.resume();
      while (!waiting.done())
        run(&stale_loop, sleep_for(&stale_loop, 1ms));
    }
    EXPECT_EQ(ended, "cancelled");
    run(&stale_loop, stale_client.close());
  }
  EXPECT_EQ(uv_loop_close(&stale_loop), 0);
}

TEST_F(PolicyStoreTest, AFollowersInspectRefusedAsStaleReadsThePolicyAgain) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 5/min")));
  // As above: the stale follower cannot see the change's notice before it inspects.
  uv_loop_t stale_loop;
  ASSERT_EQ(uv_loop_init(&stale_loop), 0);
  {
    Client stale_client(&stale_loop, ClientOptions{.url = server_.url()});
    Limiter stale(stale_client, LimiterOptions{.name = "api", .policy_refresh = 1h});
    run(&stale_loop, stale.try_acquire("k"));

    run(loop(), store.set("api", Policy::parse("fixed_window 50/min")));
    const std::int64_t new_version = run(loop(), store.record("api"))->version;
    Limiter current(client(), LimiterOptions{.name = "api"});
    run(loop(), current.try_acquire("k"));

    const std::vector<LimitState> states = run(&stale_loop, stale.inspect("k"));
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0].state.policy_version, new_version);
    EXPECT_EQ(states[0].state.limit, 50);
    EXPECT_EQ(states[0].state.remaining, 48);
    run(&stale_loop, stale_client.close());
  }
  EXPECT_EQ(uv_loop_close(&stale_loop), 0);
}

TEST_F(PolicyStoreTest, AStateNewerThanTheStoredPolicyMakesTheStoreAdvanceItsVersionsOnce) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 5/min")));
  const std::int64_t version = run(loop(), store.record("api"))->version;
  Limiter limiter(client(), LimiterOptions{.name = "api", .policy_refresh = 1h});
  EXPECT_EQ(run(loop(), limiter.try_acquire("k")).policy_version, version);
  // The key's state stamped with a version the store does not hold (e.g. its record was lost in
  // a failover while the state keys remained): `us:f:p:0:0:0:d:burst:pv:written`, pv ninth.
  const std::vector<std::string> keys = server_.keys();
  const auto state = std::find_if(keys.begin(), keys.end(), [](const std::string& key) {
    return key.find(":k}") != std::string::npos;
  });
  ASSERT_NE(state, keys.end());
  std::string stamp = server_.command({"GET", *state}).str;
  std::size_t pv_start = 0;
  for (int field = 0; field < 8; ++field)
    pv_start = stamp.find(':', pv_start) + 1;
  const std::size_t pv_end = stamp.find(':', pv_start);
  ASSERT_NE(pv_end, std::string::npos) << stamp;
  stamp.replace(pv_start, pv_end - pv_start, std::to_string(version + 100));
  server_.command({"SET", *state, stamp, "KEEPTTL"});
  server_.command({"CONFIG", "RESETSTAT"});

  // The store lost the changes the state was written under: it moves past them, once, and the
  // call is decided under the same policy with the state kept.
  const Decision decision = run(loop(), limiter.try_acquire("k"));
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.remaining, 3);
  EXPECT_GT(decision.policy_version, version + 100);
  EXPECT_EQ(run(loop(), store.record("api"))->version, decision.policy_version);
  EXPECT_EQ(run(loop(), store.get("api")), Policy::parse("gcra 5/min"));
  // The refused decision, one read of the record, the advance, the read after it and the
  // decision; perhaps the read of the advance's notice, one more for a notice that came during
  // a read, and the read that follows the subscription's confirmation: a bounded few, where a
  // loop until the deadline makes hundreds.
  EXPECT_GE(server_.script_calls(), 5);
  EXPECT_LE(server_.script_calls(), 10);
}

TEST_F(PolicyStoreTest, WhenRedisCannotAnswerTheFailurePolicyUsesThePolicyReadLast) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 7/min")));
  Limiter open(client(), LimiterOptions{.name = "api", .on_failure = {FailurePolicy::fail_open}});
  Limiter fallback(
      client(), LimiterOptions{.name = "api", .on_failure = {FailurePolicy::local_fallback, 0.5}});
  EXPECT_TRUE(run(loop(), open.try_acquire("k")).allowed);
  EXPECT_TRUE(run(loop(), fallback.try_acquire("k")).allowed);
  server_.kill();
  const Decision opened = run(loop(), open.try_acquire("k"));
  EXPECT_TRUE(opened.allowed);
  EXPECT_EQ(opened.source, Source::fail_open);
  EXPECT_EQ(opened.limit, 7);
  const Decision fell_back = run(loop(), fallback.try_acquire("k"));
  EXPECT_EQ(fell_back.source, Source::fallback);
  EXPECT_GE(fell_back.limit, 3);  // half of the 7 read last
  EXPECT_LE(fell_back.limit, 4);
}

TEST_F(PolicyStoreTest, WhenRedisCannotAnswerBeforeAnyPolicyWasReadTheCallIsPolicyNotFound) {
  Limiter open(client(), LimiterOptions{.name = "api", .on_failure = {FailurePolicy::fail_open}});
  server_.kill();
  try {
    run(loop(), open.try_acquire("k"));
    ADD_FAILURE() << "decided with no policy read";
  } catch (const PolicyNotFound& e) {
    EXPECT_FALSE(e.store_read()) << "the store never answered: " << e.what();
  }
  EXPECT_THROW(run(loop(), open.acquire("k")), PolicyNotFound);
}

TEST_F(PolicyStoreTest, AChangeWhoseNoticeIsLostIsSeenWithinThePolicyRefresh) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 1/min")));
  Limiter limiter(client(), LimiterOptions{.name = "api", .policy_refresh = 100ms});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  // The notice of the change is published while the pub/sub connection is down.
  server_.command({"CLIENT", "KILL", "TYPE", "pubsub"});
  run(loop(), store.set("api", Policy::parse("gcra 1000/min")));
  const std::int64_t version = run(loop(), store.record("api"))->version;
  const auto changed = std::chrono::steady_clock::now();
  while (run(loop(), limiter.peek("k")).policy_version != version)
    run(loop(), sleep_for(loop(), 1ms));
  std::printf("a change whose notice was lost reached the follower in %.1f ms (refresh 100 ms)\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - changed)
                  .count());
}

TEST_F(PolicyStoreTest, AFollowerWaitsInAcquireUnderTheStoredPolicy) {
  PolicyStore store(client());
  run(loop(), store.set("reserving", Policy::parse("gcra 10/s burst 1")));
  run(loop(), store.set("retrying", Policy::parse("fixed_window 1/200ms")));
  const std::int64_t reserving_version = run(loop(), store.record("reserving"))->version;
  for (const std::string name : {"reserving", "retrying"}) {
    Limiter limiter(client(), LimiterOptions{.name = name});
    EXPECT_TRUE(run(loop(), limiter.acquire("k")).allowed) << name;
    const Decision waited = run(loop(), limiter.acquire("k"));
    EXPECT_TRUE(waited.allowed) << name;
    EXPECT_GT(waited.waited, 0us) << name;
    EXPECT_EQ(waited.policy_version, run(loop(), store.record(name))->version) << name;
    const Decision denied = run(loop(), limiter.acquire("k", 1, {.max_wait = 1ms}));
    EXPECT_FALSE(denied.allowed) << name;
  }
  EXPECT_GT(reserving_version, 0);
}

Task<void> decide_many(Limiter& limiter, int count) {
  for (int i = 0; i < count; ++i)
    (void)co_await limiter.try_acquire("k" + std::to_string(i % 100));
}

/// Decisions per second of `limiter` from 32 coroutines at once.
double decisions_per_second(uv_loop_t* loop, Limiter& limiter, int total) {
  const auto started = std::chrono::steady_clock::now();
  auto all = [](Limiter& target, int each) -> Task<void> {
    TaskGroup group;
    for (int i = 0; i < 32; ++i)
      group.add(decide_many(target, each));
    co_await group.join();
  };
  run(loop, all(limiter, total / 32));
  return total / std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

TEST_F(PolicyStoreTest, FollowingAStoredPolicyCostsAboutWhatAGivenPolicyCosts) {
  PolicyStore store(client());
  run(loop(), store.set("followed", Policy::parse("gcra 1000000/s")));
  Limiter followed(client(), LimiterOptions{.name = "followed"});
  Limiter given(client(), Policy::parse("gcra 1000000/s"), LimiterOptions{.name = "given"});
  (void)run(loop(), followed.try_acquire("warm-up"));
  (void)decisions_per_second(loop(), given, 32 * 100);  // warms the connection and the keys
  (void)decisions_per_second(loop(), followed, 32 * 100);
  double given_rate = 0;
  double followed_rate = 0;
  for (int round = 0; round < 3; ++round) {
    given_rate = std::max(given_rate, decisions_per_second(loop(), given, 32 * 500));
    followed_rate = std::max(followed_rate, decisions_per_second(loop(), followed, 32 * 500));
  }
  std::printf(
      "decisions/s, 32 coroutines, one client, best of 3: given policy %.0f, followed "
      "policy %.0f\n",
      given_rate, followed_rate);
}

/// Peeks `key` until a decision is made under `version` (the change's notice, then a read).
void await_version(uv_loop_t* loop, Limiter& limiter, const std::string& key,
                   std::int64_t version) {
  while (run(loop, limiter.peek(key)).policy_version != version)
    run(loop, sleep_for(loop, 200us));
}

TEST_F(PolicyStoreTest, AKeyUntouchedSinceATighteningIsConvertedAtItsTimeNotAtALaterOverride) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 100/min burst 100")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k", 100)).allowed);
  run(loop(), store.set("api", Policy::parse("gcra 100/h burst 100")));  // as_is: k holds 0

  // Why the wait: under the old rate, k would refill 2 permits meanwhile.
  run(loop(), sleep_for(loop(), 1300ms));
  run(loop(), store.set_override("api", "other", Policy::parse("gcra 5/s")));
  await_version(loop(), limiter, "other", run(loop(), store.read("api")).version);
  EXPECT_EQ(admitted(loop(), limiter, "k", 5), 0);
}

TEST_F(PolicyStoreTest, RemovingAnOverrideConvertsItsKeyAtTheRemovalsTimeNotAtALaterOverride) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 100/h burst 100")));
  run(loop(), store.set_override("api", "gold", Policy::parse("gcra 100/min burst 100")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("gold", 100)).allowed);
  run(loop(), store.remove_override("api", "gold"));  // as_is: gold holds 0

  // Why the wait: under the tier's rate, gold would refill 2 permits meanwhile.
  run(loop(), sleep_for(loop(), 1300ms));
  run(loop(), store.set_override("api", "other", Policy::parse("gcra 5/s")));
  await_version(loop(), limiter, "other", run(loop(), store.read("api")).version);
  EXPECT_EQ(admitted(loop(), limiter, "gold", 5), 0);
}

TEST_F(PolicyStoreTest, RemovingAnOverrideCreditsNoTimeSpentUnderTheTierAtTheNamesRate) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 100/min burst 100")));
  run(loop(), store.set_override("api", "gold", Policy::parse("gcra 1/h burst 1")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(admitted(loop(), limiter, "gold", 2), 1);

  // Why the wait: time spent under the tier must not be credited at the name's rate.
  run(loop(), sleep_for(loop(), 1300ms));
  run(loop(), store.remove_override("api", "gold"));
  const std::int64_t removal = run(loop(), store.read("api")).version;
  await_version(loop(), limiter, "gold", removal);
  const Decision gold = run(loop(), limiter.try_acquire("gold"));
  EXPECT_FALSE(gold.allowed);  // as_is: the 0 permits gold held under its tier
  EXPECT_EQ(gold.policy_version, removal);
  EXPECT_EQ(gold.limit, 100);
}

TEST_F(PolicyStoreTest, AResetCarriesOnceNotAgainWhenAnOverrideMakesTheNextVersion) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 3/24h")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(admitted(loop(), limiter, "a", 5), 3);

  run(loop(), store.set("api", Policy::parse("fixed_window 3/24h"), Carry::reset));
  await_version(loop(), limiter, "a", run(loop(), store.record("api"))->version);
  EXPECT_EQ(admitted(loop(), limiter, "a", 5), 3);  // reset: full again, once

  run(loop(), store.set_override("api", "b", Policy::parse("fixed_window 10/24h")));
  await_version(loop(), limiter, "b", run(loop(), store.read("api")).version);
  EXPECT_EQ(admitted(loop(), limiter, "a", 5), 0);  // the override's version resets nothing
}

TEST_F(PolicyStoreTest, AnOverrideChangeLeavesTheOtherKeysDecisionsAtTheirVersion) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 10/s")));
  const std::int64_t central = run(loop(), store.record("api"))->version;
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(run(loop(), limiter.try_acquire("a")).policy_version, central);

  run(loop(), store.set_override("api", "b", Policy::parse("gcra 100/s")));
  const std::int64_t added = run(loop(), store.read("api")).version;
  await_version(loop(), limiter, "b", added);
  EXPECT_EQ(run(loop(), limiter.try_acquire("a")).policy_version, central);

  run(loop(), store.remove_override("api", "b"));
  const StoredPolicies removed = run(loop(), store.read("api"));
  EXPECT_EQ(removed.removed_overrides.at("b"),
            (OverrideRemoval{removed.version, removed.removed_overrides.at("b").since_us}));
  await_version(loop(), limiter, "b", removed.version);
  EXPECT_EQ(run(loop(), limiter.try_acquire("a")).policy_version, central);

  run(loop(), store.set("api", Policy::parse("gcra 20/s")));
  const StoredPolicies stored = run(loop(), store.read("api"));
  EXPECT_TRUE(stored.removed_overrides.empty());  // the policy's version is newer
  await_version(loop(), limiter, "a", stored.version);
  EXPECT_EQ(run(loop(), limiter.try_acquire("b")).policy_version, stored.version);
}

/// acquire(key) on `limiter`, stopped by `stop`: what it ended with.
Task<void> stopped_acquire(Limiter& limiter, std::string key, std::stop_token stop,
                           std::string* ended) {
  try {
    co_await limiter.acquire(key, 1, {.stop = stop});
    *ended = "granted";
  } catch (const Cancelled& e) {
    *ended = e.what();
  }
}

// Review finding: a cancelled reservation was given back under the name's policy although the
// key followed its override; the key's state then carried the name's newer version, and every
// later call on the key was refused as stale until its deadline.
TEST_F(PolicyStoreTest, ACancelledWaitOnAnOverriddenKeyGivesBackUnderTheOverride) {
  PolicyStore store(client());
  run(loop(), store.set("tiers", Policy::parse("gcra 10/s burst 1")));
  run(loop(), store.set_override("tiers", "vip", Policy::parse("gcra 1/s burst 1")));
  run(loop(), store.set("tiers", Policy::parse("gcra 1/min burst 1")));
  const std::int64_t tier_version = run(loop(), store.read("tiers")).overrides.at("vip").version;
  Limiter limiter(client(), LimiterOptions{.name = "tiers"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("vip")).allowed);

  std::stop_source stop;
  std::string ended;
  test::StartedTask waiting =
      test::start(stopped_acquire(limiter, "vip", stop.get_token(), &ended));
  run(loop(), sleep_for(loop(), 50ms));
  stop.request_stop();
  run(loop(), sleep_for(loop(), 50ms));
  ASSERT_TRUE(waiting.done());
  EXPECT_THAT(ended, ::testing::HasSubstr("given back"));

  const Decision after = run(loop(), limiter.try_acquire("vip"));
  EXPECT_EQ(after.policy_version, tier_version);
  EXPECT_LE(after.retry_after, 1s) << "the key is still under the tier's 1/s";
}

TEST_F(PolicyStoreTest, AFollowerFirstCalledAfterItsClientClosedFailsAndLeavesNoHandle) {
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  run(loop(), client().close());
  EXPECT_THROW(run(loop(), limiter.try_acquire("k")), Error);
}

TEST_F(PolicyStoreTest, AFollowerRefusesSetPolicy) {
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_THROW(limiter.set_policy(Policy::parse("gcra 1/s")), InvalidArgument);
}

TEST_F(PolicyStoreTest, AnOverrideAppliesToItsKeyOnlyAndRemovingItReturnsTheKeyToThePolicy) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("fixed_window 1/min")));
  run(loop(), store.set_override("api", "gold", Policy::parse("fixed_window 5/min")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_EQ(admitted(loop(), limiter, "gold", 10), 5);
  EXPECT_EQ(admitted(loop(), limiter, "plain", 10), 1);

  run(loop(), store.remove_override("api", "gold"));
  const std::int64_t version = run(loop(), store.read("api")).version;
  while (run(loop(), limiter.peek("gold")).policy_version != version)
    run(loop(), sleep_for(loop(), 200us));
  const Decision gold = run(loop(), limiter.peek("gold"));
  EXPECT_EQ(gold.limit, 1);
  EXPECT_FALSE(run(loop(), limiter.try_acquire("gold")).allowed);
}

TEST_F(PolicyStoreTest, ARemovedPolicyIsPolicyNotFoundNeverAnAllow) {
  PolicyStore store(client());
  run(loop(), store.set("api", Policy::parse("gcra 10/s")));
  Limiter limiter(client(), LimiterOptions{.name = "api"});
  EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);
  run(loop(), store.remove("api"));
  bool refused = false;
  while (!refused) {
    try {
      EXPECT_TRUE(run(loop(), limiter.try_acquire("k")).allowed);  // before the notice
      run(loop(), sleep_for(loop(), 200us));
    } catch (const PolicyNotFound&) {
      refused = true;
    }
  }
}

TEST_F(PolicyStoreTest, PerClientPoliciesGiveEachClientItsOwnStateAndOverallOnesShareIt) {
  Client second(loop(), ClientOptions{.url = server_.url()});
  EXPECT_NE(client().id(), second.id());
  Policy per_client = Policy::parse("fixed_window 2/min; scope per_client");
  Limiter first_own(client(), per_client, {.name = "own"});
  Limiter second_own(second, per_client, {.name = "own"});
  EXPECT_EQ(admitted(loop(), first_own, "k", 5), 2);
  EXPECT_EQ(admitted(loop(), second_own, "k", 5), 2);

  Limiter first_shared(client(), Policy::parse("fixed_window 2/min"), {.name = "own"});
  Limiter second_shared(second, Policy::parse("fixed_window 2/min"), {.name = "own"});
  EXPECT_EQ(admitted(loop(), first_shared, "k", 5) + admitted(loop(), second_shared, "k", 5), 2);
  run(loop(), second.close());
}

TEST_F(PolicyStoreTest, AClientIdOutsideItsCharactersIsAConfigError) {
  EXPECT_THROW(Client(loop(), ClientOptions{.url = server_.url(), .id = "a:b"}), ConfigError);
  EXPECT_THROW(Client(loop(), ClientOptions{.url = server_.url(), .id = std::string(65, 'a')}),
               ConfigError);
}

TEST_F(PolicyStoreTest, AStoredPerClientPolicyIsFollowedPerClient) {
  PolicyStore store(client());
  run(loop(), store.set("own", Policy::parse("gcra 2/min; scope per_client")));
  Client second(loop(), ClientOptions{.url = server_.url(), .id = "worker-2"});
  EXPECT_EQ(second.id(), "worker-2");
  Limiter first(client(), LimiterOptions{.name = "own"});
  Limiter other(second, LimiterOptions{.name = "own"});
  EXPECT_EQ(admitted(loop(), first, "k", 5), 2);
  EXPECT_EQ(admitted(loop(), other, "k", 5), 2);
  run(loop(), second.close());
}

TEST_F(PolicyStoreTest, TenProcessesRaceTrySetAndExactlyOneWins) {
  const char* racer = std::getenv("REDLIMIT_POLICY_RACER");
  if (racer == nullptr) GTEST_SKIP() << "REDLIMIT_POLICY_RACER is not set";
  const std::int64_t start = std::chrono::duration_cast<std::chrono::microseconds>(
                                 (std::chrono::system_clock::now() + 300ms).time_since_epoch())
                                 .count();
  std::vector<pid_t> racers;
  for (int i = 0; i < 10; ++i) {
    racers.push_back(
        test::start_process({racer, server_.url(), "race", "gcra " + std::to_string(i + 1) + "/s",
                             std::to_string(start)}));
  }
  int winners = 0;
  int losers = 0;
  for (const pid_t pid : racers) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) ++winners;
    if (WEXITSTATUS(status) == 3) ++losers;
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(losers, 9);
  PolicyStore store(client());
  EXPECT_EQ(run(loop(), store.record("race"))->version, 1);
}

/// A policy store on a Redis Cluster of three primaries.
class PolicyStoreClusterTest : public test::LoopTest {
 protected:
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  test::RedisCluster cluster_{3, 0};
  // Why long timeouts: the test checks that followers follow, not how fast the client connects.
  // Under the sanitizers, on a busy machine, the first command's connections to the seed and the
  // three primaries missed the default 250 ms (CI: "no connection within the command's
  // deadline").
  Client client_{
      loop(), ClientOptions{.url = cluster_.url(), .connect_timeout = 5s, .command_timeout = 5s}};
};

TEST_F(PolicyStoreClusterTest, FollowersOfNamesOnEveryPrimaryFollowTheirChanges) {
  PolicyStore store(client_);
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i)
    names.push_back("name-" + std::to_string(i));
  std::vector<Limiter> limiters;
  for (const std::string& name : names) {
    run(loop(), store.set(name, Policy::parse("gcra 1/min")));
    limiters.emplace_back(client_, LimiterOptions{.name = name});
    EXPECT_EQ(admitted(loop(), limiters.back(), "k", 2), 1) << name;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    run(loop(), store.set(names[i], Policy::parse("gcra 100/min"), Carry::reset));
    await_version(loop(), limiters[i], "k", run(loop(), store.record(names[i]))->version);
    EXPECT_EQ(run(loop(), limiters[i].try_acquire("k")).limit, 100) << names[i];
  }
  for (const std::size_t primary : cluster_.primaries()) {
    EXPECT_GT(cluster_.node(primary).integer({"DBSIZE"}), 0) << "nothing on primary " << primary;
  }
}

}  // namespace
}  // namespace redlimit

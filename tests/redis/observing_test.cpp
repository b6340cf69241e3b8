// What a limiter tells its operator: its counts (Metrics), its decision events, shadow mode,
// inspect(), and the fleet's counts the client adds up in Redis.
#include <gtest/gtest.h>

#include <map>
#include <stop_token>
#include <vector>

#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class Observing : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

/// The decisions a test was given, by [allowed][source]: what the metrics must say.
using Tally = std::array<std::array<std::uint64_t, source_count>, 2>;

void count(Tally& tally, const Decision& decision) {
  ++tally[decision.allowed ? 1 : 0][static_cast<std::size_t>(decision.source)];
}

const LimiterStats& stats_of(const MetricsSnapshot& snapshot, std::string_view name) {
  for (const LimiterStats& stats : snapshot.limiters) {
    if (stats.name == name) return stats;
  }
  throw std::runtime_error("no stats for " + std::string(name));
}

Task<void> decide_many(Limiter& limiter, int calls, Tally& tally) {
  for (int i = 0; i < calls; ++i)
    count(tally, co_await limiter.try_acquire("user"));
}

TEST_F(Observing, MetricsCountEachDecisionByResultAndSource) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("fixed_window 5/1m"), {.name = "api"});
  Tally tally{};
  run(loop(), decide_many(limiter, 12, tally));
  run(loop(), client.close());

  const LimiterStats& stats = stats_of(client.metrics()->snapshot(), "api");
  EXPECT_EQ(stats.decisions, tally);
  EXPECT_EQ(stats.decided(true, Source::redis), 5u);
  EXPECT_EQ(stats.decided(false, Source::redis) + stats.decided(false, Source::deny_cache), 7u);
  EXPECT_EQ(stats.in_flight, 0);
  EXPECT_EQ(stats.waiters, 0);
  EXPECT_EQ(stats.wait_seconds.count, 0u) << "try_acquire() does not wait";
}

TEST_F(Observing, LimitersOfOneNameAddUpAndCallErrorsAreCountedByType) {
  auto metrics = std::make_shared<Metrics>();
  Client client(loop(), {.url = server_.url(), .metrics = metrics});
  Limiter first(client, Policy::parse("gcra 100/s burst 100"), {.name = "shared"});
  Limiter second(client, Policy::parse("gcra 100/s burst 100"), {.name = "shared"});
  Limiter follower(client, {.name = "nothing-stored"});
  run(loop(), [&]() -> Task<void> {
    co_await first.try_acquire("a");
    co_await second.try_acquire("b");
    EXPECT_THROW(co_await first.try_acquire("a", 0), InvalidArgument);
    EXPECT_THROW(co_await follower.try_acquire("a"), PolicyNotFound);
    co_await client.close();
  }());
  const MetricsSnapshot snapshot = metrics->snapshot();
  const LimiterStats& shared = stats_of(snapshot, "shared");
  EXPECT_EQ(shared.decided(true, Source::redis), 2u);
  EXPECT_EQ(shared.errors[static_cast<std::size_t>(CallError::invalid_argument)], 1u);
  EXPECT_EQ(stats_of(snapshot, "nothing-stored")
                .errors[static_cast<std::size_t>(CallError::policy_not_found)],
            1u);
}

TEST_F(Observing, AcquireCountsItsWaitAndItsWaitersWhileTheyWait) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("gcra 20/s burst 1"), {.name = "paced"});
  LimiterStats during;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    // One passes at once; the others reserve 50 and 100 ms ahead and wait for their slots.
    for (int i = 0; i < 3; ++i)
      group.add([&]() -> Task<void> { co_await limiter.acquire("k"); }());
    co_await sleep_for(loop(), 25ms);
    during = stats_of(client.metrics()->snapshot(), "paced");
    co_await group.join();
    co_await client.close();
  }());
  EXPECT_EQ(during.waiters, 2);
  EXPECT_EQ(during.in_flight, 2);
  const LimiterStats after = stats_of(client.metrics()->snapshot(), "paced");
  EXPECT_EQ(after.waiters, 0);
  EXPECT_EQ(after.in_flight, 0);
  EXPECT_EQ(after.decided(true, Source::redis), 3u);
  EXPECT_EQ(after.wait_seconds.count, 3u);
  EXPECT_GE(after.wait_seconds.sum, 0.14) << "about 0.05 + 0.1 s waited";
  EXPECT_EQ(after.wait_seconds.cumulative_counts.back(), 3u);
}

TEST_F(Observing, ShadowModeAllowsWhatTheLimitDeniesAndSaysSo) {
  Client client(loop(), {.url = server_.url()});
  Limiter shadow(client, Policy::parse("fixed_window 3/1m"), {.name = "trial", .shadow = true});
  Limiter enforcing(client, Policy::parse("fixed_window 3/1m"), {.name = "trial"});
  std::vector<Decision> decisions;
  Decision after;
  run(loop(), [&]() -> Task<void> {
    for (int i = 0; i < 5; ++i)
      decisions.push_back(co_await shadow.try_acquire("user"));
    // acquire() never waits in shadow mode: it decides once.
    decisions.push_back(co_await shadow.acquire("user", 1, {.max_wait = 10s}));
    after = co_await enforcing.peek("user");
    co_await client.close();
  }());
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    EXPECT_TRUE(decisions[i].allowed) << i;
    EXPECT_EQ(decisions[i].shadow_denied, i >= 3) << i;
    if (i >= 3) {
      EXPECT_GT(decisions[i].retry_after, 0us) << "the limit's own retry_after";
    }
    EXPECT_LT(decisions[i].waited, 1s) << i;
  }
  EXPECT_EQ(after.remaining, 0) << "the shadow limiter took the 3 permits the limit allowed";
  const LimiterStats& stats = stats_of(client.metrics()->snapshot(), "trial");
  EXPECT_EQ(stats.shadow_denials, 3u);
  EXPECT_EQ(stats.decided(true, Source::redis), 3u);
  EXPECT_EQ(stats.decided(false, Source::redis) + stats.decided(false, Source::deny_cache), 3u);
}

TEST_F(Observing, TheListenerHearsHowEachCallEnded) {
  Client client(loop(), {.url = server_.url()});
  std::vector<std::string> heard;
  LimiterOptions options{.name = "events"};
  options.on_decision = [&](const DecisionEvent& event) {
    heard.push_back(std::string(to_string(event.kind)) + " " + std::string(event.key) + " " +
                    std::to_string(event.permits) +
                    (event.decision != nullptr && event.decision->allowed ? " +" : " -"));
    EXPECT_EQ(event.limiter, "events");
  };
  Limiter limiter(client, Policy::parse("gcra 10/s burst 1"), options);
  run(loop(), [&]() -> Task<void> {
    co_await limiter.try_acquire("a");
    co_await limiter.try_acquire("a");
    co_await limiter.acquire("b");
    co_await limiter.acquire("b");  // waits 100 ms for its slot
    std::stop_source stop;
    TaskGroup group;
    group.add([&]() -> Task<void> {
      EXPECT_THROW(co_await limiter.acquire("b", 1, {.stop = stop.get_token()}), Cancelled);
    }());
    co_await sleep_for(loop(), 20ms);
    stop.request_stop();
    co_await group.join();
    co_await client.close();
  }());
  const std::vector<std::string> expected{"allowed a 1 +", "denied a 1 -", "allowed b 1 +",
                                          "waited b 1 +", "cancelled b 1 -"};
  EXPECT_EQ(heard, expected);
}

TEST_F(Observing, TheListenerHearsTheFailurePolicysAnswer) {
  const int port = test::free_port();
  Client client(loop(),
                {.url = "redis://127.0.0.1:" + std::to_string(port), .connect_timeout = 100ms});
  std::vector<DecisionEventKind> kinds;
  LimiterOptions options{.name = "down", .on_failure = {.kind = FailurePolicy::fail_open}};
  options.on_decision = [&](const DecisionEvent& event) { kinds.push_back(event.kind); };
  Limiter limiter(client, Policy::parse("gcra 10/s"), options);
  Decision decision;
  run(loop(), [&]() -> Task<void> {
    decision = co_await limiter.try_acquire("k");
    co_await client.close();
  }());
  EXPECT_EQ(decision.source, Source::fail_open);
  EXPECT_EQ(kinds, std::vector<DecisionEventKind>{DecisionEventKind::failure_policy});
  EXPECT_EQ(stats_of(client.metrics()->snapshot(), "down").decided(true, Source::fail_open), 1u);
}

TEST_F(Observing, AListenerThatThrowsDoesNotChangeTheDecision) {
  Client client(loop(), {.url = server_.url()});
  LimiterOptions options{.name = "careless"};
  options.on_decision = [](const DecisionEvent&) { throw std::runtime_error("listener bug"); };
  Limiter limiter(client, Policy::parse("gcra 10/s"), options);
  Decision decision;
  run(loop(), [&]() -> Task<void> {
    decision = co_await limiter.try_acquire("k");
    co_await client.close();
  }());
  EXPECT_TRUE(decision.allowed);
}

TEST_F(Observing, InspectReadsEveryLimitAndItsTtlConsumingNothing) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("gcra 10/s burst 10; fixed_window 100/1m"),
                  {.name = "inspected"});
  std::vector<LimitState> fresh, used, again;
  run(loop(), [&]() -> Task<void> {
    fresh = co_await limiter.inspect("user");
    co_await limiter.try_acquire("user", 4);
    used = co_await limiter.inspect("user");
    again = co_await limiter.inspect("user");
    co_await client.close();
  }());
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].state.remaining, 10);
  EXPECT_EQ(fresh[1].state.remaining, 100);
  EXPECT_FALSE(fresh[0].ttl) << "a fresh key has no state in Redis";
  ASSERT_EQ(used.size(), 2u);
  EXPECT_EQ(used[0].limit.algorithm, Algorithm::gcra);
  EXPECT_EQ(used[0].state.limit, 10);
  EXPECT_EQ(used[0].state.remaining, 6);
  EXPECT_EQ(used[1].state.remaining, 96);
  EXPECT_GT(used[0].state.reset_after, 0us);
  ASSERT_TRUE(used[0].ttl);
  ASSERT_TRUE(used[1].ttl);
  EXPECT_GT(*used[1].ttl, 0ms);
  EXPECT_LE(*used[1].ttl, 61s);
  EXPECT_NE(used[0].redis_key, used[1].redis_key);
  EXPECT_EQ(used[1].redis_key.substr(0, 3), "rl:");
  EXPECT_EQ(again[1].state.remaining, 96) << "inspect() consumes nothing";
}

TEST_F(Observing, InProcessLimitersCountOnlyWhenGivenMetrics) {
  auto metrics = std::make_shared<Metrics>();
  Limiter counted(loop(), Policy::parse("gcra 1/s"), {.name = "local", .metrics = metrics});
  Limiter uncounted(loop(), Policy::parse("gcra 1/s"), {.name = "quiet"});
  run(loop(), [&]() -> Task<void> {
    co_await counted.try_acquire("k");
    co_await counted.try_acquire("k");
    co_await uncounted.try_acquire("k");
  }());
  const MetricsSnapshot snapshot = metrics->snapshot();
  ASSERT_EQ(snapshot.limiters.size(), 1u);
  EXPECT_EQ(stats_of(snapshot, "local").decided(true, Source::local), 1u);
  EXPECT_EQ(stats_of(snapshot, "local").decided(false, Source::local), 1u);
}

TEST_F(Observing, ClientsAddTheirDecisionCountsToTheFleetsInRedis) {
  Client first(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Client second(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Limiter a(first, Policy::parse("fixed_window 4/1m"), {.name = "fleet:name"});
  Limiter b(second, Policy::parse("fixed_window 4/1m"), {.name = "fleet:name"});
  Tally tally{};
  run(loop(), [&]() -> Task<void> {
    co_await decide_many(a, 3, tally);
    co_await sleep_for(loop(), 250ms);  // at least one interval: published while running
    co_await decide_many(b, 3, tally);
    co_await first.close();
    co_await second.close();  // publishes what is left
  }());
  // The name is escaped as in every key: ':' becomes %3A.
  const std::string key = "rl:stats:{fleet%3Aname}";
  EXPECT_EQ(server_.command({"HGET", key, "allowed"}).as_string(), "4");
  EXPECT_EQ(server_.command({"HGET", key, "denied"}).as_string(), "2");
  const long long ttl_ms = server_.integer({"PTTL", key});
  EXPECT_GT(ttl_ms, 23 * 3600 * 1000LL);
}

TEST_F(Observing, AStatsIntervalBelowTheFloorIsAConfigError) {
  EXPECT_THROW(Client(loop(), {.url = server_.url(), .stats_interval = 10ms}), ConfigError);
  Client off(loop(), {.url = server_.url(), .stats_interval = 0ms});
  run(loop(), off.close());
}

}  // namespace
}  // namespace redlimit

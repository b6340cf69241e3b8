// What a limiter tells its operator: its counts (Metrics), its decision events, shadow mode
// and inspect(). The fleet's counts in Redis: fleet_counts_test.cpp.
#include <gtest/gtest.h>

#include <functional>
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
#include "support/started_task.hpp"

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

/// A copy: the snapshot is often a temporary.
LimiterStats stats_of(const MetricsSnapshot& snapshot, std::string_view name) {
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

  const LimiterStats stats = stats_of(client.metrics()->snapshot(), "api");
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

/// acquire() of one permit of `key`. Why a function: a capturing lambda coroutine that outlives
/// the statement starting it would read its captures from a destroyed closure.
Task<void> acquire_one(Limiter& limiter, std::string key) {
  co_await limiter.acquire(std::move(key));
}

/// acquire() of one permit of `key`, which `stop` must cancel.
Task<void> acquire_until_cancelled(Limiter& limiter, std::string key, std::stop_token stop) {
  EXPECT_THROW(co_await limiter.acquire(std::move(key), 1, {.stop = stop}), Cancelled);
}

/// acquire() of one permit of `key`, whose task the test destroys while it waits.
Task<void> acquire_abandoned(Limiter& limiter, std::string key) {
  co_await limiter.acquire(std::move(key));
  ADD_FAILURE() << "an abandoned call went on";
}

/// The stats of `name` once `ready` says they are what the test waits for, or after 2 s.
Task<LimiterStats> stats_when(uv_loop_t* loop, const Metrics& metrics, std::string name,
                              std::function<bool(const LimiterStats&)> ready) {
  const auto until = std::chrono::steady_clock::now() + 2s;
  for (;;) {
    LimiterStats stats = stats_of(metrics.snapshot(), name);
    if (ready(stats) || std::chrono::steady_clock::now() > until) co_return stats;
    co_await sleep_for(loop, 2ms);
  }
}

TEST_F(Observing, AcquireCountsItsWaitAndItsWaitersWhileTheyWait) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("gcra 4/s burst 1"), {.name = "paced"});
  LimiterStats during;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    // One passes at once; the others reserve 250 and 500 ms ahead and wait for their slots.
    for (int i = 0; i < 3; ++i)
      group.add(acquire_one(limiter, "k"));
    during = co_await stats_when(loop(), *client.metrics(), "paced",
                                 [](const LimiterStats& stats) { return stats.waiters == 2; });
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
  EXPECT_GE(after.wait_seconds.sum, 0.7) << "about 0.25 + 0.5 s waited";
  EXPECT_EQ(after.wait_seconds.cumulative_counts.back(), 3u);
}

TEST_F(Observing, CancelledAndAbandonedCallsAreCountedAndLeaveNothingInFlight) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("gcra 1/s burst 1"), {.name = "given-up"});
  run(loop(), limiter.try_acquire("k"));
  std::stop_source stop;
  {
    test::StartedTask cancelled =
        test::start(acquire_until_cancelled(limiter, "k", stop.get_token()));
    test::StartedTask abandoned = test::start(acquire_abandoned(limiter, "k"));
    const LimiterStats waiting =
        run(loop(), stats_when(loop(), *client.metrics(), "given-up",
                               [](const LimiterStats& stats) { return stats.waiters == 2; }));
    EXPECT_EQ(waiting.in_flight, 2);
    stop.request_stop();
    // The cancellation gives the reservation back in one round trip, then ends the call.
    const LimiterStats after_stop =
        run(loop(), stats_when(loop(), *client.metrics(), "given-up",
                               [](const LimiterStats& stats) { return stats.cancelled == 1; }));
    EXPECT_EQ(after_stop.cancelled, 1u);
    EXPECT_TRUE(cancelled.done());
    EXPECT_FALSE(abandoned.done());
  }  // the abandoned call's task is destroyed here, while it waits
  run(loop(), client.close());
  const LimiterStats after = stats_of(client.metrics()->snapshot(), "given-up");
  EXPECT_EQ(after.cancelled, 2u);
  EXPECT_EQ(after.in_flight, 0);
  EXPECT_EQ(after.waiters, 0);
  EXPECT_EQ(after.errors, (std::array<std::uint64_t, call_error_count>{}));
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
    after = co_await enforcing.peek("user");
    co_await client.close();
  }());
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    EXPECT_TRUE(decisions[i].allowed) << i;
    EXPECT_EQ(decisions[i].shadow_denied, i >= 3) << i;
    if (i >= 3) {
      EXPECT_GT(decisions[i].retry_after, 0us) << "the limit's own retry_after";
    }
  }
  EXPECT_EQ(after.remaining, 0) << "the shadow limiter took the 3 permits the limit allowed";
  const LimiterStats stats = stats_of(client.metrics()->snapshot(), "trial");
  EXPECT_EQ(stats.shadow_denials, 2u);
  EXPECT_EQ(stats.decided(true, Source::redis), 3u);
  EXPECT_EQ(stats.decided(false, Source::redis) + stats.decided(false, Source::deny_cache), 2u);
}

TEST_F(Observing, ShadowAcquireDecidesOnceAndDeniesOnlyWhatItWouldNotHaveWaitedFor) {
  Client client(loop(), {.url = server_.url()});
  Limiter shadow(client, Policy::parse("gcra 1/s burst 2"), {.name = "trial", .shadow = true});
  Decision would_wait, would_deny;
  std::chrono::steady_clock::duration took{};
  run(loop(), [&]() -> Task<void> {
    co_await shadow.acquire("user");
    co_await shadow.acquire("user");
    // Enforced, the third would wait about 1 s for its slot: in shadow mode it is allowed now.
    const auto started = std::chrono::steady_clock::now();
    would_wait = co_await shadow.acquire("user", 1, {.max_wait = 10s});
    took = std::chrono::steady_clock::now() - started;
    would_deny = co_await shadow.acquire("user", 1, {.max_wait = 100ms});
    EXPECT_THROW(co_await shadow.acquire("user", 1, {.max_wait = -1us}), InvalidArgument);
    co_await client.close();
  }());
  EXPECT_LT(took, 500ms) << "a shadow acquire() never waits";
  EXPECT_TRUE(would_wait.allowed);
  EXPECT_FALSE(would_wait.shadow_denied) << "enforced, it would have been allowed after waiting";
  EXPECT_GT(would_wait.retry_after, 500ms) << "the wait it would have had";
  EXPECT_TRUE(would_deny.allowed);
  EXPECT_TRUE(would_deny.shadow_denied) << "enforced, it would have been denied";
  const LimiterStats stats = stats_of(client.metrics()->snapshot(), "trial");
  EXPECT_EQ(stats.decided(true, Source::redis), 3u);
  EXPECT_EQ(stats.decided(false, Source::redis) + stats.decided(false, Source::deny_cache), 1u);
  EXPECT_EQ(stats.shadow_denials, 1u);
  EXPECT_EQ(stats.wait_seconds.count, 4u);
  EXPECT_GT(stats.wait_seconds.sum, 0.5) << "the would-be wait is observed";
  EXPECT_EQ(stats.errors[static_cast<std::size_t>(CallError::invalid_argument)], 1u);
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
  // Why 1/s: the third acquire of "b" is stopped 20 ms after it began, long before its slot, 1 s
  // after the second's (which a busy machine may wake late).
  Limiter limiter(client, Policy::parse("gcra 1/s burst 1"), options);
  run(loop(), [&]() -> Task<void> {
    co_await limiter.try_acquire("a");
    co_await limiter.try_acquire("a");
    co_await limiter.acquire("b");
    co_await limiter.acquire("b");  // waits 1 s for its slot
    std::stop_source stop;
    TaskGroup group;
    group.add(acquire_until_cancelled(limiter, "b", stop.get_token()));
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

}  // namespace
}  // namespace redlimit

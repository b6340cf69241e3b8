// The fleet's decision counts: every client adds its limiters' decisions up in Redis
// (ClientOptions::stats_interval), and fleet_limiter_names() / read_fleet_counts() read them
// back, as `redlimit watch` does.
#include "redlimit/fleet_counts.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fleet/stats_publisher.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/acl_line.hpp"
#include "support/loop_test.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;

class FleetCountsTest : public test::LoopTest {
 protected:
  test::RedisServer server_;
};

/// `calls` try_acquire() of "user" on `limiter`; returns how many were allowed.
Task<int> decide(Limiter& limiter, int calls) {
  int allowed = 0;
  for (int i = 0; i < calls; ++i)
    allowed += (co_await limiter.try_acquire("user")).allowed ? 1 : 0;
  co_return allowed;
}

TEST_F(FleetCountsTest, ClientsAddTheirDecisionCountsUpInRedis) {
  Client first(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Client second(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Limiter a(first, Policy::parse("fixed_window 4/1d"), {.name = "fleet:name"});
  Limiter b(second, Policy::parse("fixed_window 4/1d"), {.name = "fleet:name"});
  std::string published_while_running;
  run(loop(), [&]() -> Task<void> {
    co_await decide(a, 3);
    co_await sleep_for(loop(), 350ms);  // three intervals: published while running
    published_while_running = server_.command({"HGET", "rl:stats:{fleet%3Aname}", "allowed"}).str;
    co_await decide(b, 3);
    co_await first.close();
    co_await second.close();  // publishes what is left
  }());
  EXPECT_EQ(published_while_running, "3");
  // The name is escaped as in every key: ':' becomes %3A.
  const std::string key = "rl:stats:{fleet%3Aname}";
  EXPECT_EQ(server_.command({"HGET", key, "allowed"}).as_string(), "4");
  EXPECT_EQ(server_.command({"HGET", key, "denied"}).as_string(), "2");
  EXPECT_GT(server_.integer({"PTTL", key}), 23 * 3600 * 1000LL);
  EXPECT_GT(server_.integer({"PTTL", "rl:stats:names"}), 23 * 3600 * 1000LL);
  EXPECT_TRUE(server_.keys_without_ttl().empty());
}

// Found in review (not named by an issue): the fleet's counts were taken from the process's
// counters of a name, so limiters of one name under two prefixes, or on clients of two Redis
// servers sharing one Metrics, sent all their decisions to whichever published first.
TEST_F(FleetCountsTest, EachClientSendsItsOwnDecisionsUnderEachPrefixOfAName) {
  test::RedisServer other_server;
  const auto shared = std::make_shared<Metrics>();
  Client client(loop(), {.url = server_.url(), .metrics = shared, .stats_interval = 100ms});
  Client elsewhere(loop(), {.url = other_server.url(), .metrics = shared, .stats_interval = 100ms});
  const Policy roomy = Policy::parse("fixed_window 100/1d");
  Limiter first(client, roomy, {.name = "x", .prefix = "p1"});
  Limiter second(client, roomy, {.name = "x", .prefix = "p2"});
  Limiter remote(elsewhere, roomy, {.name = "x", .prefix = "p1"});
  run(loop(), [&]() -> Task<void> {
    co_await decide(first, 5);
    co_await decide(second, 3);
    co_await decide(remote, 2);
    co_await client.close();
    co_await elsewhere.close();
  }());
  EXPECT_EQ(server_.command({"HGET", "p1:stats:{x}", "allowed"}).as_string(), "5");
  EXPECT_EQ(server_.command({"HGET", "p2:stats:{x}", "allowed"}).as_string(), "3");
  EXPECT_EQ(other_server.command({"HGET", "p1:stats:{x}", "allowed"}).as_string(), "2");
}

TEST_F(FleetCountsTest, TheNamesAndCountsReadBackAreThoseDecided) {
  Client client(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Limiter sms(client, Policy::parse("fixed_window 2/1d"), {.name = "sms"});
  Limiter api(client, Policy::parse("fixed_window 5/1d"), {.name = "api"});
  Limiter shadow(client, Policy::parse("fixed_window 1/1d"), {.name = "trial", .shadow = true});
  Limiter other_prefix(client, Policy::parse("fixed_window 1/1d"), {.name = "x", .prefix = "o"});
  std::vector<std::string> names, other_names;
  std::vector<FleetCounts> counts;
  // Why named before the coroutine: g++ 12 cannot build this braced list inside one.
  std::vector<std::string> asked{"sms", "trial", "unknown"};
  Client reader(loop(), {.url = server_.url()});
  run(loop(), [&]() -> Task<void> {
    co_await decide(sms, 3);
    co_await decide(api, 1);
    co_await decide(shadow, 3);
    co_await decide(other_prefix, 1);
    co_await client.close();  // publishes what is left
    names = co_await fleet_limiter_names(reader);
    other_names = co_await fleet_limiter_names(reader, "o");
    counts = co_await read_fleet_counts(reader, std::move(asked));
    co_await reader.close();
  }());
  EXPECT_EQ(names, (std::vector<std::string>{"api", "sms", "trial"}));
  EXPECT_EQ(other_names, std::vector<std::string>{"x"});
  const std::vector<FleetCounts> expected{
      {.name = "sms", .allowed = 2, .denied = 1},
      {.name = "trial", .allowed = 1, .denied = 2, .shadow_denied = 2},
      {.name = "unknown"}};
  EXPECT_EQ(counts, expected);
}

TEST_F(FleetCountsTest, ReadingRefusesAMalformedPrefixBeforeAnyIoAndABadCountAsProtocolError) {
  Client client(loop(), {.url = server_.url()});
  server_.command({"HSET", "rl:stats:{bad}", "allowed", "ten"});
  EXPECT_THROW(run(loop(), fleet_limiter_names(client, "bad prefix")), InvalidArgument);
  EXPECT_THROW(run(loop(), read_fleet_counts(client, {"sms"}, "")), InvalidArgument);
  EXPECT_THROW(run(loop(), read_fleet_counts(client, {""})), InvalidArgument);
  EXPECT_THROW(run(loop(), read_fleet_counts(client, {"bad"})), ProtocolError);
  run(loop(), client.close());
}

/// Limiters of `names` names made one after another while `client` publishes, each deciding
/// `per_name` times as soon as it is made: names keep appearing while counts are being sent.
Task<void> names_appearing(Client& client, int names, int per_name,
                           std::vector<std::unique_ptr<Limiter>>& limiters) {
  for (int i = 0; i < names; ++i) {
    limiters.push_back(std::make_unique<Limiter>(client, Policy::parse("gcra 1000/s"),
                                                 LimiterOptions{.name = "n" + std::to_string(i)}));
    co_await decide(*limiters.back(), per_name);
    if (i % 100 == 0) co_await sleep_for(client.loop(), 100ms);
  }
  // Why close at once: a publication is probably under way (each sends one call per name);
  // close() waits for it, then sends what was decided since.
  co_await client.close();
}

TEST_F(FleetCountsTest, EveryDecisionArrivesWhileNamesAppearAndWhenClosingDuringAPublication) {
  Client client(loop(), {.url = server_.url(), .stats_interval = 100ms});
  std::vector<std::unique_ptr<Limiter>> limiters;
  constexpr int names = 1000;
  run(loop(), names_appearing(client, names, 2, limiters));
  for (int i = 0; i < names; ++i) {
    const Reply allowed =
        server_.command({"HGET", "rl:stats:{n" + std::to_string(i) + "}", "allowed"});
    ASSERT_FALSE(allowed.is_nil()) << "n" << i;
    EXPECT_EQ(allowed.as_string(), "2") << "n" << i;
  }
  EXPECT_EQ(server_.integer({"ZCARD", "rl:stats:names"}), names);
}

// Found in review (not named by an issue): a client kept the tally of every prefix and name its
// limiters ever had, and went through all of them at every interval: a process that makes
// limiters of ever new names (redlimit-server names a caller's limit by its rate) grew for good.
TEST_F(FleetCountsTest, AClientForgetsANamesTallyOnceItsLimitersAreGoneAndItsCountsSent) {
  Client client(loop(), {.url = server_.url(), .stats_interval = 100ms});
  Limiter kept(client, Policy::parse("fixed_window 4/1d"), {.name = "kept"});
  constexpr int names = 50;
  std::size_t tallies_while_alive = 0;
  std::size_t tallies_after = 0;
  run(loop(), [&]() -> Task<void> {
    std::vector<std::unique_ptr<Limiter>> gone;
    for (int i = 0; i < names; ++i) {
      gone.push_back(std::make_unique<Limiter>(client, Policy::parse("fixed_window 4/1d"),
                                               LimiterOptions{.name = "gone" + std::to_string(i)}));
      co_await decide(*gone.back(), 1);
    }
    co_await decide(kept, 1);
    tallies_while_alive = client.stats_publisher()->tallies();
    gone.clear();
    // Why a bound of 10 s, not one interval: on a busy machine a publication may take longer.
    for (int i = 0; i < 100 && client.stats_publisher()->tallies() > 1; ++i)
      co_await sleep_for(loop(), 100ms);
    tallies_after = client.stats_publisher()->tallies();
    co_await decide(kept, 1);
    co_await client.close();
  }());
  EXPECT_EQ(tallies_while_alive, names + 1u);
  EXPECT_EQ(tallies_after, 1u) << "the tally of the limiter still alive, only";
  for (int i = 0; i < names; ++i) {
    const Reply allowed =
        server_.command({"HGET", "rl:stats:{gone" + std::to_string(i) + "}", "allowed"});
    ASSERT_FALSE(allowed.is_nil()) << "gone" << i;
    EXPECT_EQ(allowed.as_string(), "1") << "gone" << i;
  }
  EXPECT_EQ(server_.command({"HGET", "rl:stats:{kept}", "allowed"}).as_string(), "2");
}

TEST_F(FleetCountsTest, TwoClosesAtOnceBothWaitUntilTheLastCountsAreSent) {
  Client client(loop(), {.url = server_.url(), .command_timeout = 5s, .stats_interval = 100ms});
  Limiter limiter(client, Policy::parse("fixed_window 1/1d"), {.name = "closing"});
  run(loop(), [&]() -> Task<void> {
    co_await decide(limiter, 2);  // allowed, then denied and remembered
    server_.pause();
    co_await sleep_for(loop(), 150ms);  // the timer fired: a publication waits for Redis
    co_await decide(limiter, 3);        // denied from the deny cache: not yet published
    TaskGroup closing;
    closing.add(client.close());
    closing.add(client.close());
    // Why parameters, not captures: the lambda is gone once add() returns.
    closing.add([](uv_loop_t* loop, test::RedisServer& server) -> Task<void> {
      co_await sleep_for(loop, 100ms);
      server.resume();
    }(loop(), server_));
    co_await closing.join();
  }());
  EXPECT_EQ(server_.command({"HGET", "rl:stats:{closing}", "allowed"}).as_string(), "1");
  EXPECT_EQ(server_.command({"HGET", "rl:stats:{closing}", "denied"}).as_string(), "4");
}

TEST_F(FleetCountsTest, AClientDestroyedWithoutCloseDuringAPublicationEndsItQuietly) {
  auto client = std::make_unique<Client>(
      loop(), ClientOptions{.url = server_.url(), .command_timeout = 5s, .stats_interval = 100ms});
  auto limiter = std::make_unique<Limiter>(*client, Policy::parse("fixed_window 1/1d"),
                                           LimiterOptions{.name = "dropped"});
  run(loop(), [&]() -> Task<void> {
    co_await decide(*limiter, 2);
    server_.pause();
    co_await sleep_for(loop(), 150ms);  // the timer fired: a publication waits for Redis
  }());
  // Against the contract (close() first), but no crash and no handle left open.
  limiter.reset();
  client.reset();
  server_.resume();
  uv_run(loop(), UV_RUN_DEFAULT);
  EXPECT_EQ(server_.command({"HGET", "rl:stats:{dropped}", "allowed"}).as_string(), "1");
}

TEST_F(FleetCountsTest, CountsRedisRefusesAreNotTheApplicationsErrors) {
  // A user of the least-privilege line from before fleet counts existed: no HINCRBY.
  std::string line(test::acl_setuser);
  line.erase(line.find(" +hincrby"), std::string(" +hincrby").size());
  server_.command(test::words(line));
  Client client(loop(),
                {.url = "redis://redlimit:change-me@127.0.0.1:" + std::to_string(server_.port()),
                 .stats_interval = 100ms});
  Limiter limiter(client, Policy::parse("gcra 100/s"), {.name = "api"});
  int allowed = 0;
  run(loop(), [&]() -> Task<void> {
    for (int i = 0; i < 5; ++i) {
      allowed += co_await decide(limiter, 2);
      co_await sleep_for(loop(), 100ms);
    }
    co_await client.close();
  }());
  EXPECT_EQ(allowed, 10) << "the limiter works";
  EXPECT_TRUE(server_.command({"EXISTS", "rl:stats:{api}"}).integer == 0);
  const RedisStats redis = client.metrics()->snapshot().redis;
  EXPECT_EQ(redis.errors, (std::array<std::uint64_t, redis_error_count>{}))
      << "the refused counts are not an error of any call";
}

TEST_F(FleetCountsTest, AStatsIntervalBelowTheFloorIsAConfigError) {
  EXPECT_THROW(Client(loop(), {.url = server_.url(), .stats_interval = 10ms}), ConfigError);
  Client off(loop(), {.url = server_.url(), .stats_interval = 0ms});
  run(loop(), off.close());
}

TEST_F(FleetCountsTest, AClientWritesNoCountsItWasNotAskedFor) {
  Client client(loop(), {.url = server_.url()});
  Limiter limiter(client, Policy::parse("fixed_window 4/1d"), {.name = "quiet"});
  run(loop(), [&]() -> Task<void> {
    co_await decide(limiter, 6);
    co_await sleep_for(loop(), 250ms);  // longer than the shortest interval allowed
    co_await client.close();            // would publish what is left
  }());
  for (const std::string& key : server_.keys()) {
    EXPECT_EQ(key.find(":stats:"), std::string::npos) << key;
  }
  EXPECT_FALSE(server_.keys().empty()) << "the limiter's own key is there";
}

}  // namespace
}  // namespace redlimit

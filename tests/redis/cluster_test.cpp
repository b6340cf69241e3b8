// The limiter on a Redis Cluster of 3 primaries and 3 replicas: keys spread over every primary
// and every algorithm decides as on one server; limits stay exact while slots move back and
// forth under load; a failover costs at most what the cluster itself takes to recover; and a
// shard with no live node fails only its own keys, with a typed error by their deadline.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "policy/key_format.hpp"
#include "redis/key_slot.hpp"
#include "redlimit/client.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/runtime.hpp"
#include "redlimit/task_group.hpp"
#include "support/acl_line.hpp"
#include "support/child_process.hpp"
#include "support/decision_checker.hpp"
#include "support/loop_test.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"

namespace redlimit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Algorithm all_algorithms[] = {
    Algorithm::gcra,         Algorithm::token_bucket,       Algorithm::leaky_bucket,
    Algorithm::fixed_window, Algorithm::sliding_window_log, Algorithm::sliding_window_counter};

/// The cluster's node timeout (the fixture's cluster-node-timeout).
constexpr auto node_timeout = 1000ms;

/// The hash slot of every Redis key of limiter `name` for `key`.
int slot_of(std::string_view name, std::string_view key) {
  return detail::key_slot(detail::key_base("rl", detail::escape_key_part(name), key).view());
}

/// The `nth` key ("user-<i>") of limiter `name` whose slot is in [first, last].
std::string key_in_slots(std::string_view name, int first, int last, int nth = 0) {
  for (int i = 0;; ++i) {
    std::string key = "user-" + std::to_string(i);
    const int slot = slot_of(name, key);
    if (slot >= first && slot <= last && nth-- == 0) return key;
  }
}

/// A plain key (no hash tag) in `slot`.
std::string raw_key_in_slot(int slot) {
  for (int i = 0;; ++i) {
    std::string key = "probe-" + std::to_string(i);
    if (detail::key_slot(key) == slot) return key;
  }
}

/// A loop test on its own cluster. It ends by closing the client; LoopTest then checks that
/// every uv handle was closed.
class ClusterTest : public test::LoopTest {
 protected:
  explicit ClusterTest(std::vector<std::string> extra_args = {}) : cluster_(3, 1, extra_args) {}
  void TearDown() override {
    run(loop(), client_.close());
    LoopTest::TearDown();
  }

  test::RedisCluster cluster_;
  Client client_{loop(), ClientOptions{.url = cluster_.url()}};
};

TEST_F(ClusterTest, EveryAlgorithmDecidesAsTheModelWithKeysOnEveryPrimary) {
  for (const Algorithm algorithm : all_algorithms) {
    const Policy policy = Policy::of(Limit{algorithm, {3, 60s}});
    const std::string name(to_string(algorithm));
    Limiter limiter(client_, policy, {.name = name});
    Limiter model(loop(), policy, {.name = name});
    for (int k = 0; k < 30; ++k) {
      const std::string key = "user-" + std::to_string(k);
      for (int call = 0; call < 5; ++call) {
        const Decision decision = run(loop(), limiter.try_acquire(key));
        EXPECT_TRUE(decision.source == Source::redis || decision.source == Source::deny_cache);
        EXPECT_EQ(decision.allowed, run(loop(), model.try_acquire(key)).allowed)
            << name << " key " << key << " call " << call;
      }
    }
  }
  for (const std::size_t primary : cluster_.primaries()) {
    EXPECT_GT(cluster_.node(primary).integer({"DBSIZE"}), 0)
        << "no limiter key on primary node " << primary;
  }
}

TEST_F(ClusterTest, EachNodeReloadsTheScriptAfterItsCacheIsFlushed) {
  constexpr int rounds = 3;
  Limiter limiter(client_, Policy::of(Limit{Algorithm::gcra, {1000, 1s}}), {.name = "flush"});
  for (int round = 0; round < rounds; ++round) {
    for (const std::size_t primary : cluster_.primaries())
      ASSERT_EQ(cluster_.node(primary).command({"SCRIPT", "FLUSH"}).str, "OK");
    for (int k = 0; k < 30; ++k) {
      const Decision decision = run(loop(), limiter.try_acquire("user-" + std::to_string(k)));
      EXPECT_EQ(decision.source, Source::redis);
      EXPECT_TRUE(decision.allowed);
    }
  }
  for (const std::size_t primary : cluster_.primaries()) {
    const long long loads = cluster_.node(primary).command_calls("eval");
    EXPECT_GE(loads, rounds) << "node " << primary;
    EXPECT_LE(loads, rounds) << "one EVAL per flush and connection, node " << primary;
  }
}

TEST_F(ClusterTest, AMultiLimitPolicyPeekResetAndWaitingWork) {
  Limiter both(client_, Policy{{{Algorithm::gcra, {5, 60s}}, {Algorithm::fixed_window, {3, 60s}}}},
               {.name = "both"});
  for (int k = 0; k < 10; ++k) {
    const std::string key = "user-" + std::to_string(k);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(run(loop(), both.try_acquire(key)).allowed);
    const Decision denied = run(loop(), both.try_acquire(key));
    EXPECT_FALSE(denied.allowed);
    EXPECT_EQ(denied.binding, 1u);
    EXPECT_EQ(run(loop(), both.peek(key)).remaining, 0);
    run(loop(), both.reset(key));
    EXPECT_EQ(run(loop(), both.peek(key)).remaining, 3);
  }

  // acquire() waits for its reserved time, across the cluster's pub/sub as on one server.
  Limiter paced(client_, Policy::of(Limit{Algorithm::gcra, {20, 1s}, 1}), {.name = "paced"});
  const auto start = Clock::now();
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(run(loop(), paced.acquire("sender")).allowed);
  EXPECT_GE(test::elapsed_since(start), 150ms) << "4 permits at 20/s with a burst of 1";
}

TEST_F(ClusterTest, ARedisUrlToAClusterNodeIsAConfigErrorNamingTheClusterScheme) {
  Client direct(loop(), {.url = cluster_.node(cluster_.primaries().front()).url()});
  Limiter limiter(direct, Policy::of(Limit{Algorithm::gcra, {3, 60s}}), {.name = "direct"});
  std::string message;
  for (int k = 0; k < 20 && message.empty(); ++k) {  // some key lives on another primary
    try {
      run(loop(), limiter.try_acquire("user-" + std::to_string(k)));
    } catch (const ConfigError& e) {
      message = e.what();
    }
  }
  EXPECT_NE(message.find("redis-cluster://"), std::string::npos) << message;
  run(loop(), direct.close());
}

/// Commands until one fails with ConfigError (at most 100 tries, 10 ms apart); its message.
std::string config_error_after_some_commands(uv_loop_t* loop, Client& client) {
  for (int i = 0; i < 100; ++i) {
    try {
      run(loop, client.command("GET", "k"));
    } catch (const ConfigError& e) {
      return e.what();
    }
    run(loop, sleep_for(loop, 10ms));
  }
  return "";
}

TEST(ClusterUrl, NamingAServerThatIsNoClusterNodeIsAConfigErrorAndCloseCompletes) {
  test::RedisServer server;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    const std::string url = "redis-cluster://127.0.0.1:" + std::to_string(server.port());
    Client eager(&loop, {.url = url});
    EXPECT_THROW(run(&loop, eager.connect()), ConfigError);
    EXPECT_NE(config_error_after_some_commands(&loop, eager).find("not a cluster node"),
              std::string::npos);
    run(&loop, eager.close());
    // Without connect(), the first commands go to the seed while the slot map is read.
    Client lazy(&loop, {.url = url});
    EXPECT_NE(config_error_after_some_commands(&loop, lazy).find("not a cluster node"),
              std::string::npos);
    run(&loop, lazy.close());
  }
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST_F(ClusterTest, AClientThatHasNotReadTheSlotMapPassesOverAFirstSeedThatIsDown) {
  // Without connect(), the first calls go to a seed while the slot map is read. A first seed
  // that is down (a port nobody listens on) is passed over for the next one: every call is
  // decided by Redis, the burst sent before any seed answered as well as the calls after it.
  const std::string live_seeds = cluster_.url().substr(std::string_view("redis-cluster://").size());
  const std::string url =
      "redis-cluster://127.0.0.1:" + std::to_string(test::free_port()) + "," + live_seeds;
  Client client(loop(), ClientOptions{.url = url});
  std::map<std::string, int> sources;
  {
    Limiter limiter(client, Policy::of(Limit{Algorithm::gcra, {1000, 1s}}), {.name = "seeds"});
    run(loop(), [](Limiter& limiter, std::map<std::string, int>& sources) -> Task<void> {
      TaskGroup burst;
      for (int k = 0; k < 100; ++k) {
        burst.add([](Limiter& limiter, std::string key, int& count) -> Task<void> {
          if ((co_await limiter.try_acquire(key)).source == Source::redis) ++count;
        }(limiter, "burst-" + std::to_string(k), sources["redis, in the burst"]));
      }
      co_await burst.join();
    }(limiter, sources));
    for (int k = 0; k < 100; ++k) {
      const Decision decision = run(loop(), limiter.try_acquire("after-" + std::to_string(k)));
      ++sources[std::string(to_string(decision.source)) + ", after the burst"];
    }
  }
  run(loop(), client.close());
  const std::map<std::string, int> expected = {{"redis, in the burst", 100},
                                               {"redis, after the burst", 100}};
  EXPECT_EQ(sources, expected);
}

TEST_F(ClusterTest, ACallRedirectedToANodeThatIsDownCountsNoFailureOfItsOwnAgainstTheSeed) {
  // Without connect(), a call goes to the first seed (node 0), which answers MOVED to the node
  // that serves its slot. That node is down (killed, its replica not promoted yet): the call
  // fails, and the seed, which answered, goes on serving the keys of its own slots (it was once
  // blamed for each failed try at the dead node, and its breaker opened).
  const std::size_t victim = cluster_.primary_of_slot(16383);
  ASSERT_NE(victim, 0u);
  const std::vector<int> lost_slots = cluster_.slots_of(victim);
  const std::vector<int> seed_slots = cluster_.slots_of(0);
  cluster_.node(victim).kill();
  Client client(loop(), ClientOptions{.url = cluster_.url()});
  std::vector<std::string> sources;
  {
    Limiter limiter(client, Policy::of(Limit{Algorithm::gcra, {1000, 1s}}), {.name = "blame"});
    const std::string lost_key = key_in_slots("blame", lost_slots.front(), lost_slots.back());
    EXPECT_NE(run(loop(), limiter.try_acquire(lost_key)).source, Source::redis);
    for (int k = 0; k < 5; ++k) {
      const std::string key = key_in_slots("blame", seed_slots.front(), seed_slots.back(), k);
      sources.emplace_back(to_string(run(loop(), limiter.try_acquire(key)).source));
    }
  }
  run(loop(), client.close());
  EXPECT_EQ(sources, std::vector<std::string>(5, "redis"));
}

using test::words;

TEST_F(ClusterTest, ALeastPrivilegeUserFollowsAskRedirectsWhileASlotMigrates) {
  const std::string line =
      std::string(test::acl_setuser) + " " + std::string(test::acl_cluster_rules);
  for (std::size_t i = 0; i < cluster_.size(); ++i)
    ASSERT_EQ(cluster_.node(i).command(words(line)).str, "OK") << "node " << i;
  // Slot of a fresh key starts migrating: its owner answers ASK for keys it does not hold, so
  // the decision runs on the importing node, which keeps the state while the slot is in flux.
  const std::string key = key_in_slots("migrating", 0, 16383);
  const int slot = slot_of("migrating", key);
  const auto [from, to] = cluster_.start_migrating(slot);
  const std::string slot_text = std::to_string(slot);

  std::string url = cluster_.url();
  url.insert(std::string_view("redis-cluster://").size(), "redlimit:change-me@");
  Client user(loop(), {.url = url});
  Limiter limiter(user, Policy::of(Limit{Algorithm::gcra, {3, 60s}}), {.name = "migrating"});
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(run(loop(), limiter.try_acquire(key)).allowed) << "call " << i;
  EXPECT_FALSE(run(loop(), limiter.try_acquire(key)).allowed) << "the limit holds across ASK";
  EXPECT_GE(cluster_.node(to).command_calls("asking"), 4);
  EXPECT_GT(cluster_.node(to).integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), 0);
  EXPECT_EQ(cluster_.node(from).integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), 0);

  // Elsewhere, as that user: waiting, reset, and keys on every primary.
  Limiter paced(user, Policy::of(Limit{Algorithm::gcra, {50, 1s}, 1}), {.name = "paced"});
  for (int k = 0; k < 20; ++k) {
    const std::string other = "user-" + std::to_string(k);
    EXPECT_TRUE(run(loop(), paced.acquire(other)).allowed);
    EXPECT_TRUE(run(loop(), paced.acquire(other)).allowed);
    run(loop(), paced.reset(other));
  }
  for (std::size_t i = 0; i < cluster_.size(); ++i) {
    const Reply log = cluster_.node(i).command({"ACL", "LOG", "1"});
    EXPECT_TRUE(log.elements.empty()) << "node " << i << " denied something";
  }
  run(loop(), user.close());
}

/// Ends the migration of `slot` after `delay`: every primary names `to` as its owner (no key
/// of it was moved, so the source gives it up).
Task<void> end_migration_after(uv_loop_t* loop, std::chrono::milliseconds delay,
                               const test::RedisCluster* cluster, int slot, std::size_t to) {
  co_await sleep_for(loop, delay);
  cluster->confirm_owner({slot}, to);
}

/// try_acquire() of `key`, into `out`.
Task<void> try_acquire_into(Limiter* limiter, std::string key, std::optional<Decision>* out) {
  *out = co_await limiter->try_acquire(std::move(key));
}

TEST_F(ClusterTest,
       ACallOfTwoKeysOnAMigratingSlotWaitsOutTheMigrationWithinItsDeadlineNeverFailingOnASK) {
  // Slot of a fresh key starts migrating: its owner answers ASK (it holds neither key), and the
  // importing node answers TRYAGAIN (it holds neither of the call's two keys) until the slot
  // has one owner again. The call tries again until then, within its deadline.
  Client patient(loop(), {.url = cluster_.url(), .command_timeout = 10s});
  Limiter both(patient, Policy{{{Algorithm::gcra, {5, 60s}}, {Algorithm::fixed_window, {3, 60s}}}},
               {.name = "moving"});
  const std::string key = key_in_slots("moving", 0, 16383);
  const int slot = slot_of("moving", key);
  const auto migration = cluster_.start_migrating(slot);
  Limiter hasty(client_, both.policy(), {.name = "moving"});
  const Decision unanswered = run(loop(), hasty.try_acquire(key));
  EXPECT_EQ(unanswered.source, Source::fail_closed)
      << "a call whose deadline comes first is answered by the failure policy";
  std::optional<Decision> decided;
  run(loop(), [&]() -> Task<void> {
    TaskGroup group;
    group.add(try_acquire_into(&both, key, &decided));
    group.add(end_migration_after(loop(), 300ms, &cluster_, slot, migration.to));
    co_await group.join();
  }());
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->allowed);
  EXPECT_EQ(decided->source, Source::redis);
  EXPECT_EQ(
      cluster_.node(migration.to).integer({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), 2)
      << "both limits' keys are on the slot's new owner";
  run(loop(), patient.close());
}

TEST_F(ClusterTest, NodesThatSendACallToEachOtherGetItAnsweredByTheFailurePolicy) {
  // The slot's owner gives it to another primary that does not take it (CLUSTER SETSLOT NODE
  // on the owner alone): each answers MOVED to the other. The call follows a few redirects and
  // then is unavailable, as Redis is for it: the failure policy answers.
  Limiter limiter(client_, Policy::of(Limit{Algorithm::gcra, {3, 60s}}),
                  {.name = "bounced", .on_failure = {.kind = FailurePolicy::fail_open}});
  const std::string key = key_in_slots("bounced", 0, 16383);
  const std::string slot = std::to_string(slot_of("bounced", key));
  const std::size_t owner = cluster_.primary_of_slot(slot_of("bounced", key));
  const std::size_t other = cluster_.primaries().front() == owner ? cluster_.primaries().back()
                                                                  : cluster_.primaries().front();
  ASSERT_EQ(cluster_.node(owner)
                .command({"CLUSTER", "SETSLOT", slot, "NODE", cluster_.node_id(other)})
                .str,
            "OK");
  const Decision bounced = run(loop(), limiter.try_acquire(key));
  EXPECT_TRUE(bounced.allowed);
  EXPECT_EQ(bounced.source, Source::fail_open);
  ASSERT_EQ(cluster_.node(owner)
                .command({"CLUSTER", "SETSLOT", slot, "NODE", cluster_.node_id(owner)})
                .str,
            "OK");
}

using test::hammer_binary;
using test::start_process;

/// The admitted decisions a hammer process wrote ("<server_time_us> <permits>" lines).
long long calls_of(const test::RedisCluster& cluster, const std::string& command) {
  long long calls = 0;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.live(i)) calls += cluster.node(i).command_calls(command);
  }
  return calls;
}

TEST_F(ClusterTest, SlotsMovingBackAndForthUnderLoadNeverBreakALimit) {
  // redis-cli moves the source's lowest slots: [0, moved) from the node serving slot 0 to the
  // one serving 16383, whose lowest slots they then are, so the next move brings them back.
  constexpr int moved = 200;
  constexpr int processes = 4;
  const std::size_t low = cluster_.primary_of_slot(0);
  const std::size_t high = cluster_.primary_of_slot(16383);
  const Limit limit{Algorithm::gcra, {200, 1s}, 20};
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int p = 0; p < processes; ++p) {
    outputs.push_back(cluster_.node(0).dir() + "/admits-" + std::to_string(p) + ".txt");
    // 24 coroutines offer twice the limit for 8 s; each process on its own key.
    pids.push_back(start_process(
        {hammer_binary(), cluster_.url(), key_in_slots("accuracy", 0, moved - 1, p), "gcra", "200",
         "1000000", "20", "aligned", "24", "8000", "400", outputs.back()}));
  }
  // Why statuses kept as reaped: a child reaped while polling cannot be waited for again.
  std::vector<std::optional<int>> statuses(pids.size());
  auto running = [&] {
    bool any = false;
    for (std::size_t p = 0; p < pids.size(); ++p) {
      int status = 0;
      if (statuses[p]) continue;
      if (waitpid(pids[p], &status, WNOHANG) == pids[p]) {
        statuses[p] = status;
      } else {
        any = true;
      }
    }
    return any;
  };
  int moves = 0;
  std::this_thread::sleep_for(500ms);
  while (running()) {
    cluster_.reshard(moves % 2 == 0 ? low : high, moves % 2 == 0 ? high : low, moved);
    ++moves;
  }
  for (const std::optional<int>& status : statuses) {
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "a hammer process had a failed call (see its stderr above)";
  }
  EXPECT_GE(moves, 2) << "the slots did not move back and forth while the load ran";
  for (const std::string& output : outputs) {
    const auto admits = test::read_hammer_admits(output);
    EXPECT_GT(admits.size(), 100u);
    const test::CheckResult check = test::check_admits(limit, admits);
    EXPECT_TRUE(check) << check.description;
  }
  std::printf("[ resharding ] %d moves of %d slots under load; ASKING sent %lld times\n", moves,
              moved, calls_of(cluster_, "asking"));
}

/// One decision of the failover load: when it completed, whether Redis made it, and the
/// server time of an admission.
struct Outcome {
  Clock::time_point at;
  bool from_redis = false;
  std::optional<std::int64_t> admitted_at_us;
};

Task<void> keep_deciding(uv_loop_t* loop, Limiter& limiter, std::string key,
                         const std::atomic<bool>& stop, std::vector<Outcome>* outcomes) {
  while (!stop.load()) {
    const Decision decision = co_await limiter.try_acquire(key);
    const bool from_redis = decision.source == Source::redis;
    outcomes->push_back({Clock::now(), from_redis,
                         from_redis && decision.allowed
                             ? std::optional<std::int64_t>(decision.server_time_us)
                             : std::nullopt});
    co_await sleep_for(loop, 2ms);
  }
}

/// Keeps every key busy until `stop`: the `open` ones under a limit they never reach, the
/// `tight` one at about 5 times its limit.
Task<void> decide_until(uv_loop_t* loop, Limiter& open, std::vector<std::string> keys,
                        Limiter& tight, std::string tight_key, const std::atomic<bool>& stop,
                        std::vector<Outcome>* outcomes, std::vector<Outcome>* tight_outcomes) {
  TaskGroup group;
  for (const std::string& key : keys)
    group.add(keep_deciding(loop, open, key, stop, outcomes));
  group.add(keep_deciding(loop, tight, tight_key, stop, tight_outcomes));
  co_await group.join();
}

/// The first decision Redis made at or after `since`.
Clock::time_point first_redis_decision(const std::vector<Outcome>& outcomes,
                                       Clock::time_point since) {
  for (const Outcome& outcome : outcomes) {
    if (outcome.at >= since && outcome.from_redis) return outcome.at;
  }
  return Clock::time_point::max();
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

TEST_F(ClusterTest, AFailoverCostsTheLimiterNoMoreThanTheClusterTakesToRecover) {
  const int slot = 0;
  const std::size_t first_primary = cluster_.primary_of_slot(slot);
  const std::size_t first_replica = cluster_.replica_of(first_primary);
  Limiter limiter(client_, Policy::of(Limit{Algorithm::gcra, {100'000, 1s}}), {.name = "failover"});
  const Limit tight_limit{Algorithm::gcra, {100, 1s}, 10};
  Limiter tight(client_, Policy::of(tight_limit), {.name = "tight"});
  const std::string name = "failover";
  std::vector<std::string> keys;
  // Only keys of the shard that fails over: the figures below are that shard's.
  for (int k = 0; k < 16; ++k)
    keys.push_back(key_in_slots(name, 0, 5000, k));
  const std::string probe = raw_key_in_slot(slot);
  std::atomic<bool> stop = false;
  Clock::time_point killed_at, served_again_at;
  std::string chaos_error;
  std::thread chaos([&] {
    try {
      std::this_thread::sleep_for(500ms);
      cluster_.failover(first_replica);  // coordinated: the replica catches up first
      std::this_thread::sleep_for(1500ms);
      killed_at = Clock::now();
      cluster_.node(first_replica).kill();  // now the primary; the old one takes over again
      while (Clock::now() - killed_at < 10s) {
        const std::size_t owner = cluster_.primary_of_slot(slot);
        if (cluster_.live(owner) &&
            cluster_.node(owner).command({"GET", probe}).type != Reply::Type::error) {
          served_again_at = Clock::now();
          break;
        }
        std::this_thread::sleep_for(10ms);
      }
      std::this_thread::sleep_for(1500ms);
    } catch (const std::exception& e) {
      chaos_error = e.what();
    }
    stop = true;
  });
  std::vector<Outcome> outcomes;
  std::vector<Outcome> tight_outcomes;
  run(loop(), decide_until(loop(), limiter, keys, tight, key_in_slots("tight", 0, 5000), stop,
                           &outcomes, &tight_outcomes));
  chaos.join();
  ASSERT_TRUE(chaos_error.empty()) << chaos_error;
  ASSERT_NE(served_again_at, Clock::time_point{}) << "the cluster did not recover within 10 s";

  // The manual failover: the longest pause between two decisions Redis made before the kill.
  Clock::duration longest_gap{};
  std::optional<Clock::time_point> previous;
  for (const Outcome& outcome : outcomes) {
    if (outcome.at >= killed_at) break;
    if (!outcome.from_redis) continue;
    if (previous) longest_gap = std::max(longest_gap, outcome.at - *previous);
    previous = outcome.at;
  }
  const auto recovered_at = first_redis_decision(outcomes, served_again_at);
  ASSERT_NE(recovered_at, Clock::time_point::max()) << "the limiter never recovered";
  std::printf(
      "[ failover ] manual: longest pause %.3f s; SIGKILL of a primary: the cluster served the "
      "slot again after %.3f s, the limiter %.3f s after that (%.3f s in all)\n",
      seconds(longest_gap), seconds(served_again_at - killed_at),
      seconds(recovered_at - served_again_at), seconds(recovered_at - killed_at));
  // What the kill cost: writes the dead primary acknowledged but never replicated are lost, so
  // the new primary may admit those permits again (inherent to asynchronous replication).
  std::vector<test::Admit> admits;
  for (const Outcome& outcome : tight_outcomes) {
    if (outcome.admitted_at_us) admits.push_back({*outcome.admitted_at_us, 1});
  }
  const test::CheckResult check = test::check_admits(tight_limit, admits);
  std::printf("[ failover ] a key at 5x its limit: %zu admitted; %s\n", admits.size(),
              check ? "the limit held across both failovers"
                    : ("over-admitted: " + std::to_string(check.admitted - check.allowed) +
                       " permits (" + check.description + ")")
                          .c_str());
  EXPECT_LE(longest_gap, node_timeout + 2s);
  // Why against the cluster's recovery: how long Redis takes to elect a replica is not ours;
  // the limiter must follow within a slot-map refresh and a reconnect.
  // Allowed: the breaker's longest open period (500 ms), a slot-map refresh and a reconnect.
  EXPECT_LE(recovered_at - served_again_at, 1500ms);
}

class UnknownEndpointClusterTest : public ClusterTest {
 protected:
  UnknownEndpointClusterTest()
      : ClusterTest({"--cluster-preferred-endpoint-type", "unknown-endpoint"}) {}
};

TEST_F(UnknownEndpointClusterTest, NodesAnnouncedWithoutAnEndpointAreReachedAtTheHostAsked) {
  // CLUSTER SLOTS names no node's host (nil) and redirects carry none: each is the host the
  // client asked, at the port given. The slot map must load (a client without one would still
  // reach every key through MOVED, so the log is what tells).
  std::ostringstream log;
  Client client(loop(), ClientOptions{.url = cluster_.url(),
                                      .logger = std::make_shared<spdlog::logger>(
                                          "unknown-endpoint",
                                          std::make_shared<spdlog::sinks::ostream_sink_st>(log))});
  const Reply slots = run(loop(), client.command({"CLUSTER", "SLOTS"}));
  ASSERT_FALSE(slots.as_array().empty());
  EXPECT_TRUE(slots.as_array().front().as_array().at(2).as_array().at(0).is_nil());
  {
    Limiter limiter(client, Policy::of(Limit{Algorithm::gcra, {3, 60s}}), {.name = "unknown"});
    for (const std::size_t primary : cluster_.primaries()) {
      const std::vector<int> slots_of_node = cluster_.slots_of(primary);
      const std::string key = key_in_slots("unknown", slots_of_node.front(), slots_of_node.back());
      EXPECT_EQ(run(loop(), limiter.try_acquire(key)).source, Source::redis) << "node " << primary;
    }
  }
  run(loop(), client.close());
  EXPECT_EQ(log.str().find("CLUSTER SLOTS"), std::string::npos) << log.str();
}

class PartialCoverageClusterTest : public ClusterTest {
 protected:
  PartialCoverageClusterTest() : ClusterTest({"--cluster-require-full-coverage", "no"}) {}
};

TEST_F(PartialCoverageClusterTest, AShardWithNoLiveNodeFailsOnlyItsKeysTypedByTheirDeadline) {
  // Why connected first: connect() reads the slot map. A client that has not read it yet knows
  // only its seed, which may be the victim; with it dead, no other node can be found.
  run(loop(), client_.connect());
  const std::size_t victim = cluster_.primary_of_slot(0);
  const std::size_t victim_replica = cluster_.replica_of(victim);
  const std::vector<int> lost_slots = cluster_.slots_of(victim);
  Limiter limiter(client_, Policy::of(Limit{Algorithm::gcra, {1000, 1s}}), {.name = "shards"});
  const std::string lost_key = key_in_slots("shards", lost_slots.front(), lost_slots.back());
  EXPECT_EQ(run(loop(), limiter.try_acquire(lost_key)).source, Source::redis);
  cluster_.node(victim_replica).kill();
  cluster_.node(victim).kill();

  const auto deadline = client_.options().command_timeout + test::deadline_slack;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    const Decision decision = run(loop(), limiter.try_acquire(lost_key));
    EXPECT_EQ(decision.source, Source::fail_closed);
    EXPECT_FALSE(decision.allowed);
    EXPECT_LE(test::elapsed_since(start), deadline);
    const auto command_start = Clock::now();
    std::string error;
    try {
      run(loop(), client_.command("GET", raw_key_in_slot(lost_slots.front())));
    } catch (const Unavailable& e) {
      error = "unavailable";
    } catch (const ReplyError& e) {
      error = e.code();
    }
    EXPECT_TRUE(error == "unavailable" || error == "CLUSTERDOWN") << error;
    EXPECT_LE(test::elapsed_since(command_start), deadline);
  }
  int served = 0;
  int asked = 0;
  std::map<std::string, int> not_served;  // by source, for the failure message
  const auto asking_since = Clock::now();
  for (int k = 0; asked < 200; ++k) {
    const std::string key = "user-" + std::to_string(k);
    const int slot = slot_of("shards", key);
    if (slot >= lost_slots.front() && slot <= lost_slots.back()) continue;
    ++asked;
    const Decision decision = run(loop(), limiter.try_acquire(key));
    if (decision.source == Source::redis && decision.allowed) {
      ++served;
    } else {
      ++not_served[std::string(to_string(decision.source))];
    }
  }
  EXPECT_GE(served, 198) << "keys on the live shards must keep working; not served, by source: "
                         << ::testing::PrintToString(not_served) << ", in "
                         << test::elapsed_since(asking_since).count() << " ms";
}

}  // namespace
}  // namespace redlimit

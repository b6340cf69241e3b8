#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "redis/key_slot.hpp"
#include "support/redis_cluster.hpp"

namespace redlimit::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// Prints how long a step took (the fixture's timings are part of what these tests report).
void report(const std::string& step, Clock::time_point since) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
  std::cout << "[ timing   ] " << step << ": " << ms.count() << " ms\n";
}

/// A key in `slot` (a hash tag found by trying "{k:0}", "{k:1}", ...).
std::string key_in_slot(int slot) {
  for (int i = 0;; ++i) {
    std::string key = "{k:" + std::to_string(i) + "}:value";
    if (detail::key_slot(key) == slot) return key;
  }
}

Reply set(const RedisServer& node, const std::string& key, const std::string& value) {
  return node.command({"SET", key, value});
}

bool contains(const std::vector<std::size_t>& indexes, std::size_t i) {
  return std::find(indexes.begin(), indexes.end(), i) != indexes.end();
}

/// Tests that can share one cluster: each leaves 3 primaries with one replica each.
class ClusterFixtureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto start = Clock::now();
    cluster_ = std::make_unique<RedisCluster>();
    report("create a 3 x 2 cluster", start);
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the cluster was not created"; }

  static std::unique_ptr<RedisCluster> cluster_;
};

std::unique_ptr<RedisCluster> ClusterFixtureTest::cluster_;

TEST_F(ClusterFixtureTest, CoversAllSlotsWithThreePrimariesEachWithOneReplica) {
  RedisCluster& cluster = *cluster_;
  ASSERT_EQ(cluster.size(), 6u);
  const auto primaries = cluster.primaries();
  ASSERT_EQ(primaries.size(), 3u);
  EXPECT_EQ(cluster.replicas().size(), 3u);

  std::size_t slots = 0;
  std::set<std::size_t> replicas;
  for (std::size_t primary : primaries) {
    EXPECT_GT(cluster.slots_of(primary).size(), 0u);
    slots += cluster.slots_of(primary).size();
    replicas.insert(cluster.replica_of(primary));
  }
  EXPECT_EQ(slots, 16384u);
  EXPECT_EQ(replicas.size(), 3u) << "each primary has its own replica";

  std::set<std::string> ids;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    EXPECT_EQ(cluster.node_id(i).size(), 40u);
    ids.insert(cluster.node_id(i));
  }
  EXPECT_EQ(ids.size(), 6u);

  const std::string url = cluster.url();
  EXPECT_EQ(url.rfind("redis-cluster://127.0.0.1:", 0), 0u) << url;
  EXPECT_EQ(std::count(url.begin(), url.end(), ','), 2) << url;
  EXPECT_NE(url.find(":" + std::to_string(cluster.node(0).port())), std::string::npos) << url;
}

TEST_F(ClusterFixtureTest, KeysWorkOnTheirPrimaryAndOtherNodesAnswerMoved) {
  RedisCluster& cluster = *cluster_;
  for (std::size_t owner : cluster.primaries()) {
    const int slot = cluster.slots_of(owner).front();
    const std::string key = key_in_slot(slot);
    ASSERT_EQ(cluster.primary_of_slot(slot), owner);

    EXPECT_EQ(set(cluster.node(owner), key, "v").str, "OK");
    EXPECT_EQ(cluster.node(owner).command({"GET", key}).str, "v");

    const std::string moved = "MOVED " + std::to_string(slot) +
                              " 127.0.0.1:" + std::to_string(cluster.node(owner).port());
    for (std::size_t other = 0; other < cluster.size(); ++other) {
      if (other == owner) continue;
      const Reply reply = cluster.node(other).command({"GET", key});
      EXPECT_EQ(reply.type, Reply::Type::error) << "node " << other;
      EXPECT_EQ(reply.str, moved) << "node " << other;
    }
  }
}

TEST_F(ClusterFixtureTest, ReshardMovesSlotsAndTheirKeys) {
  RedisCluster& cluster = *cluster_;
  const auto primaries = cluster.primaries();
  const std::size_t from = primaries.at(0);
  const std::size_t to = primaries.at(1);
  const std::vector<int> from_before = cluster.slots_of(from);
  const std::size_t to_before = cluster.slots_of(to).size();
  // redis-cli moves the source's lowest slots; keys in them must move along.
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < 110; ++i) {
    keys.push_back(key_in_slot(from_before.at(i)));
    ASSERT_EQ(set(cluster.node(from), keys.back(), "v").str, "OK");
  }

  const auto start = Clock::now();
  cluster.reshard(from, to, 100);
  report("reshard 100 slots", start);

  const std::vector<int> from_after = cluster.slots_of(from);
  const std::vector<int> to_after = cluster.slots_of(to);
  EXPECT_EQ(to_after.size(), to_before + 100);
  EXPECT_EQ(from_after.size(), from_before.size() - 100);
  std::size_t keys_moved = 0;
  for (const std::string& key : keys) {
    const std::size_t owner = cluster.primary_of_slot(detail::key_slot(key));
    EXPECT_TRUE(owner == from || owner == to) << key;
    EXPECT_EQ(cluster.node(owner).command({"GET", key}).str, "v") << key;
    if (owner == to) ++keys_moved;
  }
  EXPECT_EQ(keys_moved, 100u);
}

TEST_F(ClusterFixtureTest, FailoverMakesTheReplicaPrimary) {
  RedisCluster& cluster = *cluster_;
  const std::size_t primary = cluster.primaries().at(0);
  const std::size_t replica = cluster.replica_of(primary);
  const std::vector<int> slots = cluster.slots_of(primary);

  const auto start = Clock::now();
  cluster.failover(replica);
  report("CLUSTER FAILOVER until ROLE master", start);
  cluster.wait_healthy();
  report("CLUSTER FAILOVER until healthy", start);

  EXPECT_TRUE(contains(cluster.primaries(), replica));
  EXPECT_EQ(cluster.replica_of(replica), primary) << "the old primary follows the new one";
  EXPECT_EQ(cluster.slots_of(replica), slots);
  EXPECT_TRUE(cluster.slots_of(primary).empty());
}

TEST(ClusterFixtureKillTest, KilledPrimaryIsReplacedByItsReplicaAndRejoinsAsReplica) {
  RedisCluster cluster;
  const std::size_t primary = cluster.primaries().at(0);
  const std::size_t replica = cluster.replica_of(primary);
  const std::string key = key_in_slot(cluster.slots_of(primary).front());
  ASSERT_EQ(set(cluster.node(primary), key, "v").str, "OK");
  // WAIT would not do: RedisServer::command() sends it on a new connection, which has written
  // nothing, so it returns at once. wait_healthy() waits until the replica has the write.
  cluster.wait_healthy();
  ASSERT_EQ(cluster.node(replica).integer({"DBSIZE"}), 1);

  const auto start = Clock::now();
  cluster.node(primary).kill();
  while (cluster.node(replica).command({"ROLE"}).elements.at(0).str != "master") {
    ASSERT_LT(Clock::now() - start, 1s + 5s) << "cluster-node-timeout + 5 s";
    std::this_thread::sleep_for(20ms);
  }
  report("SIGKILL of a primary until its replica is ROLE master", start);
  cluster.wait_healthy();
  report("SIGKILL of a primary until healthy", start);

  EXPECT_EQ(cluster.primaries().size(), 3u);
  EXPECT_FALSE(cluster.live(primary));
  EXPECT_EQ(cluster.primary_of_slot(detail::key_slot(key)), replica);
  EXPECT_EQ(cluster.node(replica).command({"GET", key}).str, "v");

  const auto restart = Clock::now();
  cluster.node(primary).start();
  cluster.wait_healthy();
  report("restart of the killed primary until healthy", restart);
  EXPECT_EQ(cluster.replica_of(replica), primary) << "it rejoins as a replica";
  EXPECT_EQ(cluster.primaries().size(), 3u);
  EXPECT_EQ(cluster.replicas().size(), 3u);
}

}  // namespace
}  // namespace redlimit::test

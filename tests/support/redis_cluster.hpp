#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"

namespace redlimit::test {

/// A private Redis Cluster for one test or test suite: primaries * (1 + replicas_per_primary)
/// RedisServer nodes on free loopback ports, joined by `redis-cli --cluster create` with
/// `cluster-node-timeout 1000`. Node indexes are fixed for the cluster's life; roles are not
/// (they change after a failover), so every role query asks the live nodes. A node is live
/// unless it was stopped or killed (node(i).pid() < 0); queries to a paused node time out.
class RedisCluster {
 public:
  /// Starts the nodes (`extra_args` are appended to every node's command line; a
  /// `--requirepass` also becomes the replicas' `--masterauth` and redis-cli's `-a`), creates
  /// the cluster and waits until wait_healthy() passes. Throws std::runtime_error, with
  /// redis-cli's output, if creation fails, and std::invalid_argument if primaries < 3.
  explicit RedisCluster(int primaries = 3, int replicas_per_primary = 1,
                        std::vector<std::string> extra_args = {});
  /// Kills every node by its PID and removes the temporary directories.
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  /// "redis-cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,...": the ports of the nodes that were
  /// primaries at creation (nodes 0 .. primaries-1), as seeds. It does not change afterwards.
  std::string url() const;
  /// The number of nodes, live or not.
  std::size_t size() const { return nodes_.size(); }
  /// Node `i` (0 <= i < size()); kill(), stop(), start() etc. act on that one redis-server.
  RedisServer& node(std::size_t i) { return *nodes_.at(i); }
  const RedisServer& node(std::size_t i) const { return *nodes_.at(i); }
  /// The node's cluster id (CLUSTER MYID, read at creation; it survives kill() and start()).
  std::string node_id(std::size_t i) const { return ids_.at(i); }
  /// Whether node `i` is running (not stopped or killed).
  bool live(std::size_t i) const { return nodes_.at(i)->pid() >= 0; }
  /// The index of the node listening on `port`; throws std::out_of_range if none.
  std::size_t index_of_port(int port) const;

  /// The live nodes whose ROLE is master, in index order.
  std::vector<std::size_t> primaries() const;
  /// The live nodes whose ROLE is slave, in index order.
  std::vector<std::size_t> replicas() const;
  /// The node that serves `slot`, from CLUSTER SLOTS asked of the first live node.
  /// Call it after wait_healthy() for a view every node shares.
  std::size_t primary_of_slot(int slot) const;
  /// The slots node `i` serves, ascending, from CLUSTER SLOTS asked of the first live node.
  std::vector<int> slots_of(std::size_t i) const;
  /// The first live replica (by index) whose ROLE names `primary` as its master; throws
  /// std::runtime_error if there is none.
  std::size_t replica_of(std::size_t primary) const;

  /// Sends CLUSTER FAILOVER to `replica` and waits until its ROLE is master; throws
  /// std::runtime_error on an error reply or after `timeout`.
  void failover(std::size_t replica, std::chrono::seconds timeout = std::chrono::seconds(10));
  /// Waits until, among the live nodes: each says cluster_state:ok and cluster_slots_ok:16384
  /// (CLUSTER INFO), each serves the same slot map (CLUSTER SLOTS) in which a live node with
  /// ROLE master serves all 16384 slots, and each replica says master_link_status:up and has
  /// reached the replication offset its primary had a moment before, so writes acknowledged
  /// before the call are on the replicas (a link that is up is not enough: after a sync the
  /// primary may hold writes back for up to 1 s). Throws std::runtime_error naming the last
  /// unmet condition after `timeout`.
  void wait_healthy(std::chrono::seconds timeout = std::chrono::seconds(30)) const;
  /// Moves `slots` slots (and their keys) from node `from` to node `to` with
  /// `redis-cli --cluster reshard` (it takes the lowest-numbered slots of `from`, and all of
  /// them if it has fewer), then waits until wait_healthy() passes. A primary left without slots
  /// becomes a replica of `to`, and its replicas follow (Redis 7 replica migration). Throws
  /// std::invalid_argument unless 1 <= slots <= 16384 (redis-cli would prompt forever), and
  /// std::runtime_error with the tail of redis-cli's output if it fails (e.g. while a slot is
  /// uncovered: "[ERR] Not all 16384 slots are covered by nodes.").
  void reshard(std::size_t from, std::size_t to, int slots);
  /// Makes sure every primary names `owner` as the owner of `slots` (CLUSTER SETSLOT NODE
  /// where one does not); throws if a primary refuses.
  void confirm_owner(const std::vector<int>& slots, std::size_t owner) const;
  /// Where a slot migration goes: the primary that serves the slot and the one importing it.
  struct Migration {
    std::size_t from;
    std::size_t to;
  };
  /// Starts migrating `slot` from its primary to another primary and moves no key (CLUSTER
  /// SETSLOT IMPORTING on the target, then MIGRATING on the source): the source answers ASK for
  /// keys of the slot it does not hold. Throws std::runtime_error if a node refuses.
  Migration start_migrating(int slot) const;

 private:
  /// Runs redis-cli with `args` (after the binary and the auth options), writing its output to
  /// `<log_dir_>/<log_name>`; throws with the log's tail on a non-zero exit or after `timeout`.
  void run_redis_cli(const std::vector<std::string>& args, const std::string& log_name,
                     std::chrono::seconds timeout) const;

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;
  int primaries_at_creation_ = 0;
  std::string password_;
  std::string log_dir_;
};

/// The redis-cli binary: $REDIS_CLI; else redis-cli next to $REDIS_SERVER if it names a path
/// with one; else "redis-cli" on PATH.
std::string redis_cli_binary();

}  // namespace redlimit::test

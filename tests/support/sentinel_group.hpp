#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/reply.hpp"
#include "support/redis_server.hpp"
#include "support/test_certificates.hpp"

namespace redlimit::test {

/// A private Redis Sentinel deployment on loopback: one primary, one replica, and three
/// sentinels (the same redis-server binary in sentinel mode, as Debian's redis-sentinel is)
/// monitoring the primary as "mymaster", with a quorum of 2 and a 5 s down-after (a busy machine
/// must not fail over on its own: tests fail over with failover()). Every process is stopped
/// by its PID.
class SentinelGroup {
 public:
  struct Options {
    /// requirepass (and masterauth) of the primary and the replica.
    std::string password{};
    /// requirepass of the sentinels.
    std::string sentinel_password{};
    /// Every node and sentinel speaks TLS only to clients and to each other (`--port 0
    /// --tls-port`, `tls-replication yes`), with certificates() (a sentinel keeps a plain port
    /// for the fixture's own commands); url() is then rediss-sentinel://.
    bool tls = false;
  };

  SentinelGroup() : SentinelGroup(Options{}) {}
  /// Starts everything and waits until every sentinel knows the replica and the other
  /// sentinels (a failover can then be asked for). Throws std::runtime_error otherwise.
  explicit SentinelGroup(Options options);
  ~SentinelGroup();
  SentinelGroup(const SentinelGroup&) = delete;
  SentinelGroup& operator=(const SentinelGroup&) = delete;

  /// "redis-sentinel://[password@]127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>#mymaster"
  std::string url() const;
  /// The data node that is the primary now (by ROLE), and the other one.
  RedisServer& primary();
  RedisServer& replica();
  /// The data nodes, in the order they were started (the first was the primary).
  RedisServer& node(std::size_t index) { return *nodes_.at(index); }
  /// A command to sentinel `index` (0-2), on a short-lived connection.
  Reply sentinel_command(std::size_t index, const std::vector<std::string>& argv) const;
  /// SENTINEL FAILOVER, then waits (up to 20 s) until the sentinels name the other node and
  /// it answers ROLE as a primary. Returns the port of the new primary.
  int failover();
  /// failover(), then the old primary follows the new one at once (the sentinels would tell it
  /// to only within their 10 s INFO period; until then the new primary has no replica).
  /// Returns the new primary's port.
  int failover_and_rejoin();
  /// SIGKILLs the primary, waits (up to 60 s) until the sentinels promote the replica, then
  /// starts the old primary again, empty, as the new one's replica. Returns the new port.
  int kill_primary_and_rejoin();
  /// Waits (up to `timeout`) until a replica acknowledges a write made on the primary (WAIT 1
  /// after an INCR of redlimit-test:replication-probe). Throws std::runtime_error otherwise.
  void wait_until_replicated(std::chrono::seconds timeout);
  /// The port the sentinels name for the primary now.
  int primary_port_by_sentinels() const;
  /// The certificates of a TLS group (Options::tls).
  const TestCertificates& certificates() const { return *certificates_; }

 private:
  struct Sentinel {
    int port = 0;      ///< plain: the fixture's commands
    int tls_port = 0;  ///< a TLS group's: the client's
    pid_t pid = -1;
  };
  /// The arguments of a data node serving clients (and replication) on `port`.
  std::vector<std::string> data_node_args(int port) const;
  void start_sentinel(Sentinel& sentinel, const std::string& config);
  void wait_until_monitoring() const;
  /// The data node the sentinels know by `port`.
  RedisServer& node_on(int port);

  Options options_;
  std::string dir_;
  std::unique_ptr<TestCertificates> certificates_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<int> node_ports_;  ///< the port the sentinels know each node by
  std::vector<Sentinel> sentinels_;
};

/// The role a data node answers ROLE with ("master", "slave"), or "" when it does not answer:
/// the sentinels kill a primary's client connections as they turn it into a replica (CLIENT KILL
/// TYPE normal), an ask in flight among them.
std::string role_of(RedisServer& node);

}  // namespace redlimit::test

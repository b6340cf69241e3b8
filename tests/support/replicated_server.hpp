#pragma once

#include <string>

#include "support/redis_server.hpp"

namespace redlimit::test {

/// A private primary with one replica (redis-server --replicaof), both on loopback and stopped
/// by their PIDs, for ClientOptions::replicas: constructed once the primary counts the replica
/// as connected and the replica's link is up.
class ReplicatedServer {
 public:
  /// Throws std::runtime_error if the replica is not linked within 20 s.
  ReplicatedServer();

  RedisServer& primary() { return primary_; }
  RedisServer& replica() { return replica_; }
  /// The primary's URL.
  std::string url() const { return primary_.url(); }
  /// Waits (up to 20 s) until the primary counts `replicas` connected replicas that acknowledged
  /// its whole replication stream (after a replica was started again, say).
  void wait_until_linked(int replicas = 1);

 private:
  RedisServer primary_{{"--repl-diskless-sync-delay", "0"}};
  RedisServer replica_;
};

}  // namespace redlimit::test

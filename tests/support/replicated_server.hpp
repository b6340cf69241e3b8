#pragma once

#include <string>

#include "redlimit/client.hpp"
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
  /// A client of the primary with replicas = 1 whose calls a stopped replica holds (a test
  /// pauses it to show what waits for it). Why so long a replica_timeout: the held calls must
  /// not time out before the test resumes the replica, on however slow a machine. Why no
  /// reservation lease: a denial longer than the lease has Redis reclaim dead owners'
  /// reservations, a second script call (queued behind the batch's WAIT while the replica is
  /// stopped).
  ClientOptions holding_client_options() const;

 private:
  RedisServer primary_{{"--repl-diskless-sync-delay", "0"}};
  RedisServer replica_;
};

}  // namespace redlimit::test

#include "support/replicated_server.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

namespace redlimit::test {

ClientOptions ReplicatedServer::holding_client_options() const {
  using namespace std::chrono_literals;
  return ClientOptions{.url = url(),
                       .command_timeout = 10s,
                       .reservation_lease = 0ms,
                       .stats_interval = 0ms,
                       .replicas = 1,
                       .replica_timeout = 8s};
}

ReplicatedServer::ReplicatedServer()
    : replica_({"--replicaof", "127.0.0.1", std::to_string(primary_.port())}) {
  wait_until_linked();
}

void ReplicatedServer::wait_until_linked(int replicas) {
  using namespace std::chrono_literals;
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    // Why WAIT: it answers once that many replicas are connected and hold every write so far.
    const Reply acknowledged = primary_.command({"WAIT", std::to_string(replicas), "100"});
    if (acknowledged.type == Reply::Type::integer && acknowledged.integer >= replicas) return;
    if (std::chrono::steady_clock::now() > give_up) {
      throw std::runtime_error("the replica did not link to the primary within 20 s");
    }
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace redlimit::test

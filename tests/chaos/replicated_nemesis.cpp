#include "chaos/replicated_nemesis.hpp"

#include <stdexcept>
#include <thread>

#include "chaos/call_log.hpp"

namespace redlimit::chaos {

FaultRun ReplicatedNemesis::inject(const Fault& fault) {
  FaultRun run{fault.kind, monotonic_ns(), 0, fault.victim};
  switch (fault.kind) {
    case FaultKind::failover:
      group_.failover_and_rejoin();
      break;
    case FaultKind::primary_kill:
      group_.kill_primary_and_rejoin();
      break;
    case FaultKind::replica_stall: {
      test::RedisServer& replica = group_.replica();
      replica.pause();
      std::this_thread::sleep_for(fault.length);
      replica.resume();
      break;
    }
    case FaultKind::worker_kill:
      fleet_.kill_in_burst(fault.victim);
      break;
    default:
      throw std::logic_error("a fault of one server, on a replicated deployment");
  }
  group_.wait_until_replicated(whole_again_timeout);
  run.end_ns = monotonic_ns();
  return run;
}

}  // namespace redlimit::chaos

#pragma once

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "redis/breaker_scope.hpp"
#include "redis/replica_waits.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

struct RedisMetrics;

/// What the WAIT that covers a script call (ClientOptions::replicas; see ReplicaWaits) means for
/// the call if it wrote: released when it counts enough replicas, else Unavailable. Whoever
/// knows whether the call wrote (its reply says) either confirms or skips; until then it holds
/// the call's circuit-breaker scope, so that the call counts once, as it finally ended.
class ReplicaAck {
 public:
  /// `round`: the WAIT that covers the call sent on `server`; `breaker`: the call's scope, not
  /// yet left; `metrics` (null: counts nowhere) must outlive the object.
  ReplicaAck(std::shared_ptr<WaitRound> round, int replicas, BreakerScope breaker,
             RedisMetrics* metrics, std::string server)
      : round_(std::move(round)),
        replicas_(replicas),
        breaker_(breaker),
        metrics_(metrics),
        server_(std::move(server)) {}

  /// The calls answered wrote nothing: the server answered; the WAIT's answer is not needed.
  void skip() { breaker_.answered(); }
  /// Waits for the WAIT's answer: null when enough replicas hold the writes, else the failure
  /// the calls that wrote get (a TimeoutError, maybe_executed(), counted in
  /// replica_shortfalls; CircuitOpen when it leaves the breaker open; ConfigError when the
  /// server refuses WAIT, e.g. no +wait in the ACL). Once only, and not after skip().
  Task<std::exception_ptr> confirm();

 private:
  std::shared_ptr<WaitRound> round_;
  int replicas_ = 0;
  BreakerScope breaker_;
  RedisMetrics* metrics_ = nullptr;
  std::string server_;
};

}  // namespace redlimit::detail

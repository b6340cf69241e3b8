#include "redis/replica_ack.hpp"

#include "metrics/instruments.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Task<std::exception_ptr> ReplicaAck::confirm() {
  co_await round_->answered();
  std::exception_ptr failure = round_->error();
  if (!failure && round_->acknowledged() < replicas_) {
    if (metrics_ != nullptr) metrics_->replica_shortfalls.add();
    failure = std::make_exception_ptr(
        TimeoutError("redis " + server_ + ": " + std::to_string(round_->acknowledged()) + " of " +
                         std::to_string(replicas_) + " replicas acknowledged the writes within " +
                         std::to_string(round_->timeout().count()) +
                         " ms (ClientOptions::replicas); they stay on the primary",
                     true));
  }
  breaker_.leave(failure, Reply{});
  co_return failure;
}

}  // namespace redlimit::detail

#pragma once

#include "limiter/backend.hpp"
#include "redis/client_core.hpp"

namespace redlimit::detail {

/// Runs a policy with one EVALSHA of the embedded `decide` script.
class RedisBackend final : public Backend {
 public:
  explicit RedisBackend(ClientCore& client) : client_(client) {}
  Task<Decision> decide(DecideRequest request) override;
  Task<void> reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base) override;

 private:
  ClientCore& client_;
};

/// The Decision in a reply of the decide script; ProtocolError if it has another shape.
Decision decision_from_reply(const Reply& reply, std::size_t limit_count);

}  // namespace redlimit::detail

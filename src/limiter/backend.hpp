#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "limiter/compiled_policy.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

enum class Operation { acquire, peek };

/// One request to a backend: a policy, the key it applies to, what to do.
///
/// Why a constructor: g++ 12 destroys an aggregate temporary twice when it is built inside a
/// co_await expression (`co_await backend.decide(DecideRequest{...})`); a class with a
/// user-provided constructor is not affected.
struct DecideRequest {
  DecideRequest(std::shared_ptr<const CompiledPolicy> policy_, std::string key_base_,
                Operation operation_, std::int64_t permits_, std::int64_t now_us_ = 0)
      : policy(std::move(policy_)),
        key_base(std::move(key_base_)),
        operation(operation_),
        permits(permits_),
        now_us(now_us_) {}

  std::shared_ptr<const CompiledPolicy> policy;
  std::string key_base;  ///< `<prefix>:{<name>:<key>}`; each limit appends its suffix
  Operation operation = Operation::acquire;
  std::int64_t permits = 1;
  std::int64_t now_us = 0;  ///< tests only: an injected time; 0 uses the backend's clock
};

/// Runs the algorithms: in Redis (RedisBackend) or in process (LocalBackend). Requests arrive
/// validated.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Task<Decision> decide(DecideRequest request) = 0;
  /// Forgets the state of every limit of `policy` for `key_base`.
  virtual Task<void> reset(std::shared_ptr<const CompiledPolicy> policy, std::string key_base) = 0;
};

}  // namespace redlimit::detail

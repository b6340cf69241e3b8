#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <string_view>

#include "limiter/backend.hpp"
#include "limiter/compiled_policy.hpp"
#include "redlimit/limiter.hpp"

namespace redlimit::detail {

/// The implementation behind Limiter: validation, keys, and the backend that decides.
class LimiterCore {
 public:
  LimiterCore(uv_loop_t* loop, std::unique_ptr<Backend> backend, Policy policy,
              LimiterOptions options);

  Task<Decision> try_acquire(std::string key, std::int64_t permits);
  Task<Decision> peek(std::string key);
  Task<void> reset(std::string key);
  void set_policy(Policy policy);
  const Policy& policy() const noexcept { return policy_->policy(); }
  const LimiterOptions& options() const noexcept { return options_; }
  Backend& backend() noexcept { return *backend_; }
  uv_loop_t* loop() const noexcept { return loop_; }

  /// A validated request for `key` under the current policy; throws InvalidArgument.
  DecideRequest request(std::string_view key, Operation operation, std::int64_t permits) const;

 private:
  uv_loop_t* loop_;
  LimiterOptions options_;
  std::string escaped_name_;
  // Why shared: calls in flight keep the policy they started with when set_policy() replaces it.
  std::shared_ptr<const CompiledPolicy> policy_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace redlimit::detail

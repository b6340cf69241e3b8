#pragma once

#include <memory>
#include <string>

#include "policy/compiled_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

/// A follower could not confirm its stored policy: the contact with Redis broke since it was
/// read, and reading it again failed. A decision is then the failure policy's answer under the
/// policy read last, never one asked of Redis; other calls fail with this ConnectionError.
class UnconfirmedPolicy : public ConnectionError {
 public:
  UnconfirmedPolicy(std::shared_ptr<const CompiledPolicy> policy, const std::string& why)
      : ConnectionError(
            "the stored policy could not be read again since the connection to Redis ended: " +
            why),
        policy_(std::move(policy)) {}
  /// The key's policy read last: what the failure policy answers under.
  const std::shared_ptr<const CompiledPolicy>& policy() const noexcept { return policy_; }

 private:
  std::shared_ptr<const CompiledPolicy> policy_;
};

}  // namespace redlimit::detail

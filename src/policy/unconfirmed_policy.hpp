#pragma once

#include <memory>
#include <string>

#include "policy/compiled_policy.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

/// A follower could not confirm its stored policy with the server it talks to now: the client's
/// contact with Redis broke since the policy was read (the server may have restarted without
/// it), and reading it again failed. A decision is then the failure policy's answer under the
/// policy read last (`policy`), never one asked of Redis under it; other calls fail with this
/// ConnectionError.
class UnconfirmedPolicy : public ConnectionError {
 public:
  UnconfirmedPolicy(std::shared_ptr<const CompiledPolicy> policy, const std::string& why)
      : ConnectionError(
            "the stored policy could not be read again since the connection to Redis "
            "ended: " +
            why),
        policy_(std::move(policy)) {}
  /// The key's policy read last: what the failure policy answers under.
  const std::shared_ptr<const CompiledPolicy>& policy() const noexcept { return policy_; }

 private:
  std::shared_ptr<const CompiledPolicy> policy_;
};

}  // namespace redlimit::detail

#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "policy/compiled_policy.hpp"
#include "redlimit/limiter.hpp"
#include "redlimit/task.hpp"

namespace redlimit::detail {

class PolicyFollower;

/// What a call that needs the stored policy raises when none could be read yet.
enum class WhenUnread {
  no_policy,    ///< PolicyNotFound: a decision (never an allow without a policy)
  unavailable,  ///< the read's Unavailable: inspect(), reset() and adjustments
};

/// Where a limiter's policy in force for a key comes from, for every call: its own
/// (fixed_policy(), replaced by set_policy()) or a PolicyStore's (stored_policies()).
class PolicySource {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~PolicySource() = default;
  /// The policy in force for `key` when it is known without I/O, else null: then resolve().
  virtual std::shared_ptr<const CompiledPolicy> ready(std::string_view key) = 0;
  /// The policy in force for `key`, of at least `min_version` (the version a script found the
  /// key's state written under; 0: any), read by `deadline`. Throws PolicyNotFound when none is
  /// stored; UnconfirmedPolicy when the one read last could not be confirmed since the contact
  /// with Redis broke; when none could be read yet, as `when_unread` says.
  virtual Task<std::shared_ptr<const CompiledPolicy>> resolve(std::string key,
                                                              std::int64_t min_version,
                                                              Clock::time_point deadline,
                                                              WhenUnread when_unread) = 0;
  /// The policy in force for `key` as last known, without I/O; null when none is.
  virtual std::shared_ptr<const CompiledPolicy> last(std::string_view key) const = 0;
  /// The limiter's policy: its own, or the stored policy of its name read last (null before).
  virtual std::shared_ptr<const CompiledPolicy> named() const = 0;
  /// Replaces a limiter's own policy (Limiter::set_policy()); InvalidArgument for a stored one.
  virtual void replace(const Policy& policy, Carry carry) = 0;
  /// Whether the policy comes from a PolicyStore (a server reached after a break may lose it).
  virtual bool stored() const noexcept = 0;
  /// Calls `on_change` whenever the policy in force may change, where that happens: it may only
  /// schedule work, never resume a coroutine. Once per source.
  virtual void on_change(std::function<void()> on_change) = 0;
};

/// A limiter's own policy, compiled now.
std::unique_ptr<PolicySource> fixed_policy(const Policy& policy);
/// The policies stored under limiter `name`, kept current by `follower`.
std::unique_ptr<PolicySource> stored_policies(std::shared_ptr<PolicyFollower> follower,
                                              std::string name);

}  // namespace redlimit::detail

#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/policy_model.hpp"
#include "algorithms/stamp.hpp"
#include "redlimit/limit.hpp"

namespace redlimit::detail {

/// The largest rate.permits and burst a limit accepts.
inline constexpr std::int64_t max_permits = 1'000'000'000'000;
/// The longest period a limit accepts (366 days).
inline constexpr std::int64_t max_period_us = 366LL * 86'400'000'000;
/// The longest time a gcra, token or leaky bucket may take to drain (10 years): keeps every
/// time the scripts compute below 2^52.
inline constexpr std::int64_t max_capacity_us = 3653LL * 86'400'000'000;

/// One validated limit, ready for the script and the models.
struct CompiledLimit {
  Limit limit;
  LimitSpec spec;
  std::int64_t capacity = 0;          ///< the most permits one request may take
  std::string key_suffix;             ///< ":<algorithm>:<index>"
  std::array<std::string, 4> fields;  ///< the script's per-limit arguments
  std::string description;            ///< "limits[1] (fixed_window 1000/1d)"
};

/// Where a policy stands among the changes of its name: what the scripts need to carry a key's
/// state over from the parameters it was written under to this policy.
struct PolicyEpoch {
  /// The stored policy's version, or 0 for a policy given in process. A script refuses a
  /// version older than one a key was already written under (StalePolicy).
  std::int64_t version = 0;
  /// The time the policy took effect (the store's Redis time, or the system clock at
  /// set_policy()), microseconds since the epoch, 0 when unknown. With version 0 it also tags a
  /// Carry::reset (detail::stamp_rule()): a reset with since 0, never sent, is never applied.
  std::int64_t since_us = 0;
  Carry carry = Carry::as_is;  ///< how state written under other parameters carries over
  friend bool operator==(const PolicyEpoch&, const PolicyEpoch&) = default;
};

/// A validated policy: what every call needs, computed once per set_policy().
class CompiledPolicy {
 public:
  /// Validates `policy`; throws InvalidArgument naming the field and the accepted range.
  static std::shared_ptr<const CompiledPolicy> compile(Policy policy, PolicyEpoch epoch = {});

  const Policy& policy() const noexcept { return policy_; }
  const PolicyEpoch& epoch() const noexcept { return epoch_; }
  /// The epoch as the scripts take it: pv, since_us and carry ("0" as_is, "1" proportional,
  /// "2" reset), computed once.
  const std::array<std::string, 3>& epoch_fields() const noexcept { return epoch_fields_; }
  /// The epoch as the algorithms' models take it.
  PolicyChange change() const noexcept {
    return PolicyChange{epoch_.version, epoch_.since_us, epoch_.carry};
  }
  const std::vector<CompiledLimit>& limits() const noexcept { return limits_; }
  const std::vector<LimitSpec>& specs() const noexcept { return specs_; }
  /// The policy of the limit at `index` alone, with its key suffix and the same epoch.
  std::shared_ptr<const CompiledPolicy> only(std::size_t index) const;
  /// Throws InvalidArgument unless 1 <= permits <= every limit's capacity.
  void check_permits(std::int64_t permits) const;
  /// Whether acquire() reserves under this policy: a single gcra, token or leaky bucket limit.
  bool reservable() const noexcept;

 private:
  Policy policy_;
  PolicyEpoch epoch_;
  std::array<std::string, 3> epoch_fields_;
  std::vector<CompiledLimit> limits_;
  std::vector<LimitSpec> specs_;
};

}  // namespace redlimit::detail

#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/policy_model.hpp"
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

/// A validated policy: what every call needs, computed once per set_policy().
class CompiledPolicy {
 public:
  /// Validates `policy`; throws InvalidArgument naming the field and the accepted range.
  static std::shared_ptr<const CompiledPolicy> compile(Policy policy);

  const Policy& policy() const noexcept { return policy_; }
  const std::vector<CompiledLimit>& limits() const noexcept { return limits_; }
  const std::vector<LimitSpec>& specs() const noexcept { return specs_; }
  /// Throws InvalidArgument unless 1 <= permits <= every limit's capacity.
  void check_permits(std::int64_t permits) const;

 private:
  Policy policy_;
  std::vector<CompiledLimit> limits_;
  std::vector<LimitSpec> specs_;
};

}  // namespace redlimit::detail

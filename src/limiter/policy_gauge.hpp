#pragma once

#include <memory>
#include <string>

#include "policy/policy_follower.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit::detail {

/// Shows a limiter's policy in force in its metrics (LimiterStats::policy_version and
/// policy_limits): where its calls count (LimiterOptions::metrics, else its client's), under
/// its name. Nothing when it counts nowhere (null metrics).
class PolicyGauge {
 public:
  PolicyGauge(std::shared_ptr<Metrics> metrics, std::string name)
      : metrics_(std::move(metrics)), name_(std::move(name)) {}

  /// Shows a policy given in code: version 0.
  void show(const Policy& policy) const;
  /// Has `follower` show each version it reads, as it reads it; returns it.
  std::shared_ptr<PolicyFollower> follow(std::shared_ptr<PolicyFollower> follower) const;

 private:
  std::shared_ptr<Metrics> metrics_;
  std::string name_;
};

}  // namespace redlimit::detail
